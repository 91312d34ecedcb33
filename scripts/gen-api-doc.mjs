// Writes docs/api.md from the schemas (run after `npm run build`).
import { writeFileSync } from 'node:fs';
import { renderApiDoc } from '../dist/shared/api-doc.js';
writeFileSync(new URL('../docs/api.md', import.meta.url), renderApiDoc());
console.log('docs/api.md written');

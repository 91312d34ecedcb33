// US social security numbers.
import { RANK, NUM_L, NUM_R, re, scan, groupSpan, add, type Candidate } from './common.js';

// ---------------------------------------------------------------------------------------------
// US social security numbers: AAA-GG-SSSS, and the undashed/spaced form only after an
// explicit "SSN" label. Shapes with an area/group/serial the SSA never issues are claimed as
// nothing (so "000-12-3456" is not then read as a phone number).
// Trigger DIGIT: both forms capture `[0-9]{3}` (case-insensitivity does not touch digits).
const SSN = re(NUM_L + String.raw`([0-9]{3})-([0-9]{2})-([0-9]{4})` + NUM_R, 'g');
const SSN_LABELLED = re(
  String.raw`\b(?:ssn|social security(?: number| no\.?)?)[ \t]{0,3}(?:#|no\.?|number)?[ \t]{0,3}[:=#]?[ \t]{0,3}` +
    String.raw`(?<![0-9])([0-9]{3})[ \u00A0]?([0-9]{2})[ \u00A0]?([0-9]{4})` +
    NUM_R,
  'gid',
);

function ssnValid(area: string, group: string, serial: string): boolean {
  if (area === '000' || area === '666' || area[0] === '9') return false;
  return group !== '00' && serial !== '0000';
}

export function detectSsn(text: string, out: Candidate[]): void {
  scan(SSN, text, (m) => {
    const ok = ssnValid(m[1] ?? '', m[2] ?? '', m[3] ?? '');
    return add(out, ok ? 'SSN' : null, m.index, m.index + m[0].length, RANK.SSN);
  });
  scan(SSN_LABELLED, text, (m) => {
    const a = groupSpan(m, 1);
    const c = groupSpan(m, 3);
    if (!a || !c) return false;
    const ok = ssnValid(m[1] ?? '', m[2] ?? '', m[3] ?? '');
    return add(out, ok ? 'SSN' : null, a[0], c[1], RANK.SSN);
  });
}

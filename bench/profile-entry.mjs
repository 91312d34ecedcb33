// bin/yello with an in-process CPU profiler (node:inspector), for bench/profile.mjs: the first
// SIGUSR2 starts profiling the event loop, the second writes the profile to $YELLO_PROFILE_OUT
// (and the next pair profiles another window).
// Node refuses --cpu-prof in NODE_OPTIONS, and this way only the measured window is profiled.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

const session = new Session();
session.connect();
let running = false;
process.on('SIGUSR2', () => {
  void (async () => {
    if (!running) {
      running = true;
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 200 });
      await session.post('Profiler.start');
      return;
    }
    running = false;
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(process.env.YELLO_PROFILE_OUT ?? 'daemon.cpuprofile', JSON.stringify(profile));
  })();
});
await import('../dist/cli/main.js');

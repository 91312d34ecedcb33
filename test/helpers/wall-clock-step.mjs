// Preloaded into a daemon child (NODE_OPTIONS=--import=…) by tests of the wall clock stepping
// back, as NTP or an administrator does to a real host: each SIGUSR2 moves what `Date` says back
// by YELLO_TEST_CLOCK_STEP_MS (default one hour). The monotonic clocks (performance.now,
// process.hrtime) are left alone, as a real step leaves them.
const step = Number(process.env.YELLO_TEST_CLOCK_STEP_MS ?? 3_600_000);
const RealDate = globalThis.Date;
let offset = 0;

class SteppedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(RealDate.now() + offset);
    else super(...args);
  }
  static now() {
    return RealDate.now() + offset;
  }
}
globalThis.Date = SteppedDate;

process.on('SIGUSR2', () => {
  offset -= step;
  // The test waits for this line before it goes on (stderr: the daemon's stdout is its JSON log).
  process.stderr.write(`wall-clock-step: ${offset} ms\n`);
});

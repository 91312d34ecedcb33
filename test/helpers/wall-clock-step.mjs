// Preloaded into a daemon child (NODE_OPTIONS=--import=…) by tests of the wall clock stepping
// back, as NTP or an administrator does to a real host: each SIGUSR2 moves what `Date` says back
// by YELLO_TEST_CLOCK_STEP_MS (default one hour). The monotonic clocks (performance.now,
// process.hrtime) are left alone, as a real step leaves them. With YELLO_TEST_CLOCK_FROZEN=1 the
// wall clock also stands still at the time the daemon started (a coarse clock, or a burst inside
// one millisecond, made permanent): every stamp of the daemon falls in the same millisecond.
const step = Number(process.env.YELLO_TEST_CLOCK_STEP_MS ?? 3_600_000);
const RealDate = globalThis.Date;
const frozenAt = process.env.YELLO_TEST_CLOCK_FROZEN === '1' ? RealDate.now() : null;
let offset = 0;
const now = () => (frozenAt ?? RealDate.now()) + offset;

class SteppedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(now());
    else super(...args);
  }
  static now() {
    return now();
  }
}
globalThis.Date = SteppedDate;

process.on('SIGUSR2', () => {
  offset -= step;
  // The test waits for this line before it goes on (stderr: the daemon's stdout is its JSON log).
  process.stderr.write(`wall-clock-step: ${offset} ms\n`);
});

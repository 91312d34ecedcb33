/**
 * The daemon's one clock for durations: limiters, timeouts, windows and uptime. It is
 * monotonic (`performance.now()`, milliseconds since the process started), so a wall clock
 * stepped back or forward (NTP, an operator, a VM resumed) never lengthens a wait, shortens a
 * window or makes an uptime negative. `Date` is for timestamps meant to be wall-clock only
 * (test/unit/monotonic-time.test.ts keeps it so).
 */
export function monotonicMs(): number {
  return performance.now();
}

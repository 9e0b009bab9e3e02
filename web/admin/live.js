// live.js: keeping what is on screen current without a Reload. The admin
// API has no event stream for operators (an order's stream is its
// customer's, and a browser's EventSource cannot send a bearer token), so
// the console asks again every few seconds: only while signed in and only
// while the tab is visible; a tab coming back asks at once.

/** every polls tick each ms milliseconds, one tick at a time, while started and visible. */
export function every(ms, tick, onState = () => {}) {
  let wanted = false;
  let timer = null;
  let running = false;

  const visible = () => document.visibilityState === 'visible';
  const report = () => onState(!wanted ? 'off' : visible() ? 'on' : 'paused');

  function schedule() {
    clearTimeout(timer);
    timer = wanted && visible() ? setTimeout(run, ms) : null;
    report();
  }

  async function run() {
    timer = null;
    if (running || !wanted || !visible()) return schedule();
    running = true;
    try {
      await tick();
    } catch {
      // a tick reports its own trouble; the next one tries again
    } finally {
      running = false;
      schedule();
    }
  }

  document.addEventListener('visibilitychange', () => {
    if (wanted && visible()) run();
    else schedule();
  });

  return {
    start() {
      wanted = true;
      schedule();
    },
    stop() {
      wanted = false;
      schedule();
    },
  };
}

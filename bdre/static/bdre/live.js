// Refresh a page's live part (the element #live) from the URL in its data-refresh, every
// data-every seconds (2 by default). The run page stops once the run has ended (its live
// part no longer says "refreshing"); a part marked data-always (the dashboard) never stops.
// Pages work without this script; it only saves pressing reload.
(function () {
  const box = document.getElementById("live");
  if (!box || !box.dataset.refresh) return;
  const url = box.dataset.refresh;
  const always = box.dataset.always !== undefined;
  const every = 1000 * (Number(box.dataset.every) || 2);
  async function tick() {
    // A hidden tab asks for nothing: it refreshes when looked at again.
    if (!document.hidden) {
      try {
        const answer = await fetch(url, { headers: { "X-Requested-With": "fetch" } });
        if (answer.redirected) return; // logged out: the log-in page is no live part
        // Gone or not for this user any more (a partition replaced under a shared reader):
        // the page as loaded is what there is to see.
        if (answer.status >= 400 && answer.status < 500) return;
        if (answer.ok) {
          box.innerHTML = await answer.text();
          if (!always && !box.querySelector("small")) return; // the run ended
        }
      } catch (e) {
        // the server restarts or the network drops: try again at the next tick
      }
    }
    setTimeout(tick, every);
  }
  setTimeout(tick, every);
})();

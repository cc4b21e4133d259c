// Refresh the run page's live part every 2 seconds while the run is going. The page works
// without this script; it only saves pressing reload.
(function () {
  const box = document.getElementById("live");
  if (!box || !box.dataset.refresh) return;
  const url = box.dataset.refresh;
  async function tick() {
    try {
      const answer = await fetch(url, { headers: { "X-Requested-With": "fetch" } });
      if (answer.ok) {
        box.innerHTML = await answer.text();
        if (!box.querySelector("small")) return; // the run ended: stop refreshing
      }
    } catch (e) {
      // the server restarts or the network drops: try again at the next tick
    }
    setTimeout(tick, 2000);
  }
  setTimeout(tick, 2000);
})();

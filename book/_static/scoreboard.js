// Unfold the scoreboard group (and the card) a link points into: a claim's card sits inside a folded
// <details>, and a link to #claim-… must show it. Runs on load and whenever the fragment changes.
(function () {
  function reveal() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    if (!id) return;
    var target = document.getElementById(id);
    if (!target) return;
    var opened = false;
    for (var el = target; el; el = el.parentElement) {
      if (el.tagName === "DETAILS" && !el.open) { el.open = true; opened = true; }
    }
    if (opened) target.scrollIntoView();
  }
  window.addEventListener("hashchange", reveal);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", reveal);
  else reveal();
})();

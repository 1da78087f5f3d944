// A number in a table never breaks across lines: a cell that holds only a number, with its ± spread,
// interval or unit ("100.0 ± 0.0", "+10.1 [3.4, 16.8]", "1.49 ×"), is set on one line.
(function () {
  var NUMBER = /^[\s\d.,:;±+\-−–×%<>≤≥()\[\]e]+$/;
  function keepNumbersWhole() {
    document.querySelectorAll("table td, table th").forEach(function (cell) {
      var text = cell.textContent.trim();
      if (text && /\d/.test(text) && NUMBER.test(text)) cell.classList.add("number-cell");
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", keepNumbersWhole);
  else keepNumbersWhole();
})();

/* fairground report pages: optional niceties. Everything reads without them. */
(function () {
  "use strict";
  /* Sort a table by the clicked column: numbers by their data-sort value, */
  /* text alphabetically; a second click reverses. */
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (th, col) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        rows.sort(function (a, b) {
          var x = a.cells[col], y = b.cells[col];
          if (!x || !y) { return 0; }
          var xs = x.getAttribute("data-sort"), ys = y.getAttribute("data-sort");
          if (xs !== null && ys !== null) { return dir * (parseFloat(xs) - parseFloat(ys)); }
          if (xs !== null) { return -1; }
          if (ys !== null) { return 1; }
          return dir * x.textContent.localeCompare(y.textContent);
        });
        table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  /* Legend entries hide and show their series in the chart above them. */
  document.querySelectorAll("ul.legend button[data-series]").forEach(function (button) {
    button.addEventListener("click", function () {
      var figure = button.closest("figure");
      var on = button.getAttribute("aria-pressed") !== "false";
      button.setAttribute("aria-pressed", on ? "false" : "true");
      figure.querySelectorAll("svg g.series").forEach(function (g) {
        if (g.getAttribute("data-series") === button.getAttribute("data-series")) {
          g.style.display = on ? "none" : "";
        }
      });
    });
  });
  /* Collapsed number tables print open. */
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });
  /* Marks the page as scripted (and the script as having run to its end). */
  document.documentElement.classList.add("js");
})();

/* django-jobs admin: an attempt's traceback opens in a full-width row under the attempt, not
   in its narrow error cell. Without this script it opens in the cell. Run again when a live
   page swaps in its new content (admin_live.js). */
"use strict";
function djJobsWideTracebacks() {
  document.querySelectorAll("#attempts-group td.field-error_cell details").forEach(function (details) {
    const pre = details.querySelector("pre.dj-jobs-traceback");
    const row = details.closest("tr");
    if (!pre || !row) {
      return;
    }
    const wide = document.createElement("tr");
    wide.className = "dj-jobs-traceback-row";
    wide.hidden = !details.open;
    const cell = document.createElement("td");
    cell.colSpan = row.cells.length;
    cell.appendChild(pre);
    wide.appendChild(cell);
    row.after(wide);
    details.addEventListener("toggle", function () {
      wide.hidden = !details.open;
    });
  });
}
document.addEventListener("DOMContentLoaded", djJobsWideTracebacks);
document.addEventListener("dj-jobs:refreshed", djJobsWideTracebacks);

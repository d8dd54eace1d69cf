// Sortable, filterable tables (no network, no library). A click on a header of table.sortable sorts
// its body by each cell's data-v (else its text), numerically under th[data-type=num], ascending then
// descending. A [data-filter=ID] box and a [data-verdict=ID] select hide the rows of table#ID that
// do not match (text anywhere in the row; the row's data-verdict); [data-count=ID] shows how many remain.
document.querySelectorAll("table.sortable").forEach((table) => {
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const control = (kind) => document.querySelector(`[data-${kind}="${table.id}"]`);
  const [text, verdict, count] = ["filter", "verdict", "count"].map(control);
  const key = (row, i, num) => {
    const cell = row.cells[i];
    const v = cell.dataset.v ?? cell.textContent.trim();
    return num ? (v === "" ? -Infinity : Number(v)) : v.toLowerCase();
  };
  Array.from(table.tHead.rows[0].cells).forEach((th, i) => {
    th.addEventListener("click", () => {
      const num = th.dataset.type === "num";
      const dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
      table.tHead.querySelectorAll("th").forEach((h) => h.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
      const order = (a, b) => { const x = key(a, i, num), y = key(b, i, num); return (x < y ? -1 : x > y ? 1 : 0) * dir; };
      rows.slice().sort(order).forEach((row) => body.appendChild(row));
    });
  });
  const filter = () => {
    const words = text ? text.value.trim().toLowerCase() : "";
    const wanted = verdict ? verdict.value : "";
    let shown = 0;
    rows.forEach((row) => {
      row.hidden = !((!words || row.textContent.toLowerCase().includes(words)) && (!wanted || row.dataset.verdict === wanted));
      shown += row.hidden ? 0 : 1;
    });
    if (count) count.textContent = shown;
  };
  [text, verdict].forEach((el) => el && el.addEventListener("input", filter));
  filter();
});

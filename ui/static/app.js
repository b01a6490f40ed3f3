// timerq dashboard: the live tail. The only script on any page; it builds
// rows with textContent, so an ID or payload is never parsed as HTML.
"use strict";
(function () {
  var table = document.getElementById("tail");
  if (!table || !window.EventSource) return;
  var body = document.getElementById("tail-body");
  var status = document.getElementById("live-status");
  var src = new EventSource(table.getAttribute("data-events"));
  src.onopen = function () { status.textContent = "live"; status.className = "live on"; };
  src.onerror = function () {
    status.className = "live";
    // A refusal (503: too many tails open) closes the source for good.
    status.textContent = src.readyState === EventSource.CLOSED
      ? "stopped: the dashboard refused the live tail, perhaps too many are open; reload to try again"
      : "reconnecting…";
  };
  src.addEventListener("problem", function (e) { status.textContent = JSON.parse(e.data); });
  src.addEventListener("fire", function (e) {
    var ev = JSON.parse(e.data);
    var tr = document.createElement("tr");
    tr.className = "new";
    var a = document.createElement("a");
    a.href = ev.link;
    a.textContent = ev.id;
    var td = document.createElement("td");
    td.className = "id";
    td.appendChild(a);
    tr.appendChild(td);
    [ev.due, ev.fired, ev.lateness, ev.payload].forEach(function (v, i) {
      var c = document.createElement("td");
      if (i === 3) c.className = "payload";
      c.textContent = v;
      tr.appendChild(c);
    });
    body.insertBefore(tr, body.firstChild);
    while (body.rows.length > 200) body.deleteRow(body.rows.length - 1);
  });
})();

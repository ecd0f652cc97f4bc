// personae ui: live updates without a build step. A running run's page follows the
// server-sent events of /runs/ID/stream and re-fetches its body when something changed;
// the runs list and chain graphs re-fetch themselves every 2 s while something runs.
"use strict";

function swap(target, url) {
  return fetch(url, { headers: { "Accept": "text/html" } })
    .then((r) => (r.ok ? r.text() : Promise.reject(new Error(r.status))))
    .then((text) => {
      const doc = new DOMParser().parseFromString(text, "text/html");
      const same = target.id ? doc.getElementById(target.id) : null;
      target.innerHTML = same ? same.innerHTML : doc.body.innerHTML;
      if (same) {
        for (const name of ["data-live"]) {
          if (same.hasAttribute(name)) target.setAttribute(name, same.getAttribute(name));
        }
      }
    });
}

function follow(run) {
  const source = new EventSource(run.dataset.stream);
  let busy = false;
  let again = false;
  const refresh = () => {
    if (busy) { again = true; return; }
    busy = true;
    swap(run, run.dataset.fragment).finally(() => {
      busy = false;
      if (again) { again = false; refresh(); }
    });
  };
  source.addEventListener("changed", refresh);
  source.addEventListener("end", () => {
    source.close();
    refresh();
    const note = document.querySelector("p.live");
    if (note) note.textContent = "run finished";
  });
}

function poll(box) {
  const live = () => box.querySelector('[data-live="1"]') || box.dataset.live === "1";
  const tick = () => {
    if (!live()) return;
    swap(box, box.dataset.poll).finally(() => setTimeout(tick, 2000));
  };
  setTimeout(tick, 2000);
}

document.addEventListener("DOMContentLoaded", () => {
  const run = document.getElementById("run");
  if (run && run.dataset.stream) follow(run);
  for (const box of document.querySelectorAll("[data-poll]")) poll(box);
});

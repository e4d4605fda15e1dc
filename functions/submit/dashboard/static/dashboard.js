// skyless dashboard: follow live logs, and load a task file into the planner. Text only, never HTML.
"use strict";

function followLog(pre) {
  const url = pre.dataset.url;
  const rank = pre.dataset.rank;
  let cursor = pre.dataset.cursor || "";
  async function poll() {
    const query = new URLSearchParams({ rank: rank });
    if (cursor) query.set("after", cursor);
    try {
      const answer = await fetch(url + "?" + query.toString(), { credentials: "same-origin" });
      if (answer.status === 401) { window.location.reload(); return; }
      if (answer.ok) {
        const page = await answer.json();
        if (page.text) {
          pre.appendChild(document.createTextNode(page.text));
          pre.scrollTop = pre.scrollHeight;
        }
        cursor = page.cursor || cursor;
        if (page.finished) { window.setTimeout(function () { window.location.reload(); }, 1000); return; }
      }
    } catch (error) {
      // the network blinked: try again on the next tick
    }
    window.setTimeout(poll, 2000);
  }
  window.setTimeout(poll, 2000);
}

function loadTaskFile(input) {
  input.addEventListener("change", function () {
    const file = input.files && input.files[0];
    if (!file) return;
    const reader = new FileReader();
    reader.onload = function () {
      document.getElementById("task").value = String(reader.result);
      const name = document.querySelector("input[name=filename]");
      if (name) name.value = file.name;
    };
    reader.readAsText(file);
  });
}

document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("pre.log-text[data-finished=false]").forEach(followLog);
  const taskFile = document.getElementById("task-file");
  if (taskFile) loadTaskFile(taskFile);
});

// tagpin console: the only script (served under a hashed name; no inline scripts: CSP).
// Shows each <time datetime> in the reader's time zone; the UTC text stays as its title.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const el of document.querySelectorAll("time[datetime]")) {
    const at = new Date(el.getAttribute("datetime"));
    if (!Number.isNaN(at.getTime())) {
      el.title = el.textContent;
      el.textContent = at.toLocaleString();
    }
  }
});

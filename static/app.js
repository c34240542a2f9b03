// durable-runs: the little JavaScript the pages need, served from our own origin
// (the Content-Security-Policy allows no inline script and no eval).
(function () {
  "use strict";

  // Live parts poll with `hx-trigger="every 5s, poll-now"` and carry `data-poll`.
  // A hidden tab does not poll; when it becomes visible again, they refresh at once.
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    if (document.visibilityState !== "visible" && elt && elt.hasAttribute("data-poll")) {
      evt.preventDefault();
    }
  });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible" && window.htmx) {
      document.querySelectorAll("[data-poll]").forEach(function (el) {
        window.htmx.trigger(el, "poll-now");
      });
    }
  });

  // Copy buttons: <button type="button" data-copy="full value">copy</button>
  document.addEventListener("click", function (evt) {
    var button = evt.target.closest("[data-copy]");
    if (!button) return;
    var done = function () {
      var label = button.textContent;
      button.textContent = "copied";
      setTimeout(function () { button.textContent = label; }, 1200);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(button.getAttribute("data-copy")).then(done);
    } else {
      var area = document.createElement("textarea");
      area.value = button.getAttribute("data-copy");
      document.body.appendChild(area);
      area.select();
      document.execCommand("copy");
      area.remove();
      done();
    }
  });

  // "Select all" checkbox for bulk decisions: <input type="checkbox" data-select-all="name">
  document.addEventListener("change", function (evt) {
    var all = evt.target.closest("[data-select-all]");
    if (all) {
      var name = all.getAttribute("data-select-all");
      document.querySelectorAll('input[type=checkbox][name="' + name + '"]').forEach(function (box) {
        box.checked = all.checked;
      });
    }
    var form = evt.target.form;
    if (form && form.hasAttribute("data-count-selected")) {
      var n = form.querySelectorAll('input[type=checkbox][name="' + form.getAttribute("data-count-selected") + '"]:checked').length;
      form.querySelectorAll("[data-selected-count]").forEach(function (el) { el.textContent = n; });
      form.querySelectorAll("[data-needs-selection]").forEach(function (el) { el.disabled = n === 0; });
    }
  });

  // A <dialog> opened by a button: <button data-open-dialog="id">
  document.addEventListener("click", function (evt) {
    var opener = evt.target.closest("[data-open-dialog]");
    if (opener) {
      var dialog = document.getElementById(opener.getAttribute("data-open-dialog"));
      if (dialog && dialog.showModal) dialog.showModal();
    }
    var closer = evt.target.closest("[data-close-dialog]");
    if (closer) {
      var d = closer.closest("dialog");
      if (d) d.close();
    }
  });

  // A GET whose URL goes into the address bar (hx-push-url) carries only the
  // parameters that are set: a form sends every field, and an empty one says nothing
  // (the pages read a missing parameter and an empty one alike). The URL shown, shared
  // or bookmarked then says exactly which filters are in effect.
  document.addEventListener("htmx:configRequest", function (evt) {
    var detail = evt.detail;
    if (detail.verb !== "get" || !detail.elt.closest) return;
    var pushing = detail.elt.closest("[hx-push-url]");
    if (!pushing || pushing.getAttribute("hx-push-url") === "false") return;
    var data = detail.formData;
    var names = [];
    data.forEach(function (value, name) {
      if (names.indexOf(name) < 0) names.push(name);
    });
    names.forEach(function (name) {
      var kept = data.getAll(name).filter(function (value) { return value !== ""; });
      data.delete(name);
      kept.forEach(function (value) { data.append(name, value); });
    });
  });

  // The run page's timeline: a bar, a mark or a stretch carries its details in an SVG
  // <title>, which a browser shows on hover only (not on a phone). A tap or a click
  // shows them in the panel under the drawing (#tl-picked) and outlines what was
  // picked; the list under it has them all, as text, for the keyboard and for readers.
  document.addEventListener("click", function (evt) {
    var frame = evt.target.closest && evt.target.closest(".tl-frame");
    var panel = frame && document.getElementById("tl-picked");
    if (!panel) return;
    var picked = evt.target, title = null;
    while (picked && picked !== frame && !title) {
      title = picked.querySelector && picked.querySelector(":scope > title");
      if (!title) picked = picked.parentNode;
    }
    if (!title) return;
    frame.querySelectorAll(".tl-picked-item").forEach(function (el) {
      el.classList.remove("tl-picked-item");
    });
    picked.classList.add("tl-picked-item");
    panel.textContent = title.textContent;
    panel.classList.remove("muted");
  });

  // htmx swaps that bring a dialog with data-show open it.
  document.addEventListener("htmx:afterSettle", function (evt) {
    evt.detail.elt.querySelectorAll && evt.detail.elt.querySelectorAll("dialog[data-show]").forEach(function (d) {
      if (!d.open && d.showModal) d.showModal();
    });
  });
})();

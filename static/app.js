// durable-runs: the little JavaScript the pages need, served from our own origin
// (the Content-Security-Policy allows no inline script and no eval).
(function () {
  "use strict";

  // Live parts poll with `hx-trigger="every 5s, poll-now"` and carry `data-poll`.
  // A hidden tab does not poll; when it becomes visible again, they refresh at once.
  // Nor does a part the keyboard is in: swapping it would throw the focus back to the
  // top of the page (the next poll after the focus leaves brings it up to date).
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    if (!elt || !elt.hasAttribute("data-poll")) return;
    var focused = document.activeElement;
    if (document.visibilityState !== "visible" ||
        (focused && focused !== document.body && elt.contains(focused))) {
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

  // Copy buttons: <button type="button" data-copy="full value">copy</button>. The button
  // says "copied" for a moment, and the page's status line (#announce) says what was
  // copied, or that nothing was, to a screen reader too (the button's own name stays).
  function announce(text) {
    var status = document.getElementById("announce");
    if (!status) return;
    status.textContent = "";
    setTimeout(function () { status.textContent = text; }, 50);  // said again if repeated
  }
  function legacyCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    document.body.appendChild(area);
    area.select();
    var copied = false;
    try { copied = document.execCommand("copy"); } catch (e) { copied = false; }
    area.remove();
    if (!copied) throw new Error("the browser refused to copy");
  }
  document.addEventListener("click", function (evt) {
    var button = evt.target.closest("[data-copy]");
    if (!button) return;
    var text = button.getAttribute("data-copy");
    var copying = navigator.clipboard && window.isSecureContext
      ? navigator.clipboard.writeText(text).catch(function () { legacyCopy(text); })
      : new Promise(function (resolve) { legacyCopy(text); resolve(); });
    copying.then(function () {
      var label = button.getAttribute("data-label") || button.textContent;
      button.setAttribute("data-label", label);
      button.textContent = "copied";
      announce("Copied " + text);
      setTimeout(function () { button.textContent = label; }, 1200);
    }, function () {
      announce("Could not copy: select the text and copy it");
    });
  });

  // A filter's problem shows beside its field, in a slot that is always there
  // (<p data-error-for="the field's id">, hidden when it has nothing to say). An htmx
  // answer to a filter sends every slot again, out of band, and leaves the fields alone
  // (one may be being typed in): each field is marked here from what its slot says.
  function markFields() {
    document.querySelectorAll("[data-error-for]").forEach(function (slot) {
      var field = document.getElementById(slot.getAttribute("data-error-for"));
      if (!field) return;
      var bad = !slot.hidden;
      var ids = (field.getAttribute("aria-describedby") || "").split(/\s+/).filter(function (id) {
        return id && id !== slot.id;
      });
      if (bad) {
        ids.unshift(slot.id);
        field.setAttribute("aria-invalid", "true");
      } else {
        field.removeAttribute("aria-invalid");
      }
      if (ids.length) field.setAttribute("aria-describedby", ids.join(" "));
      else field.removeAttribute("aria-describedby");
      var wrapper = field.closest(".field");
      if (wrapper) wrapper.classList.toggle("invalid", bad);
    });
  }
  document.addEventListener("htmx:afterSettle", markFields);

  // Fresh copies of cells elsewhere on the page, brought by a poll (<template
  // data-fresh-cells>, the queue's "on it" cells): each takes the place of the element
  // with its id, if the page still shows one. A row decided or filtered away while the
  // poll was on its way is skipped (an out-of-band swap would report a missing target).
  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll("template[data-fresh-cells]").forEach(function (holder) {
      Array.prototype.forEach.call(holder.content.children, function (fresh) {
        var old = fresh.id ? document.getElementById(fresh.id) : null;
        if (old) old.replaceWith(fresh.cloneNode(true));
      });
      holder.remove();
    });
  });

  // The reconciliation queue: when decisions have taken every row off the table while
  // the page had claims (data-refill), the table fetches the rows now at the same address
  // (its filters and page), so it never sits empty under a heading that counts claims.
  // The answer carries data-refill only if it has rows: an empty queue asks once.
  document.addEventListener("htmx:afterSettle", function () {
    var rows = document.getElementById("queue-rows");
    if (!rows || !rows.hasAttribute("data-refill") || !window.htmx) return;
    if (rows.querySelector("tbody[id^='claim-']")) return;
    rows.removeAttribute("data-refill");
    window.htmx.ajax("GET", window.location.href, { target: "#queue-rows", swap: "outerHTML" });
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

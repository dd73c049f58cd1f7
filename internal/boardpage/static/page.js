// The board page's one script. It keeps the page live: it listens to the
// server's change events (/events) and, when the board has changed, fetches
// the parts of the page that change (/fragment) and puts them in place,
// keeping any form a person has open. It also keeps the ages current, and
// sends the For you section's answers and declines without leaving the page.
// Without it the page still works; it is then current as of its last load.
(function () {
  'use strict';

  var status = document.getElementById('status');
  var actions = document.getElementById('actions');
  if (!status || !actions) {
    return; // not the board (the sign-in refusal page)
  }
  var shown = actions.dataset.version; // the version the page shows
  var busy = false;
  var again = false;
  var events = null;

  function setStatus(text, live) {
    status.textContent = text;
    status.className = 'status ' + (live ? 'on' : 'off');
  }

  // refresh fetches the fragment and puts it in place; changes that arrive
  // meanwhile make it fetch once more, never twice at once.
  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    again = false;
    fetch('/fragment' + location.search, { credentials: 'same-origin', cache: 'no-store' })
      .then(function (res) {
        if (res.status === 401) {
          events.close();
          setStatus('signed out: start bee serve again for a new link', false);
          return null;
        }
        if (!res.ok) {
          throw new Error('HTTP ' + res.status);
        }
        return res.text();
      })
      .then(function (html) {
        if (html !== null) {
          swap(html);
        }
      })
      .catch(function () {
        setStatus('update failed: retrying at the next change', false);
      })
      .then(function () {
        busy = false;
        if (again) {
          refresh();
        }
      });
  }

  // key names a form field or fold by the data-op of the part it sits in,
  // so that the same one can be found in the fresh fragment.
  function key(el) {
    var op = el.closest('[data-op]');
    if (!op) {
      return null;
    }
    return op.dataset.op + '/' + (el.name || el.tagName);
  }

  // swap replaces every data-live part of the page with its fresh copy.
  // The fragment is the server's html/template output: board text in it is
  // escaped, and a <template> runs no script while it is parsed.
  function swap(html) {
    var t = document.createElement('template');
    t.innerHTML = html;
    var focused = document.activeElement;
    var focusKey = focused && focused.name ? key(focused) : null;
    var selStart = focusKey && 'selectionStart' in focused ? focused.selectionStart : null;

    Array.prototype.forEach.call(t.content.querySelectorAll('[data-live]'), function (fresh) {
      var old = document.getElementById(fresh.id);
      if (!old) {
        return;
      }
      old.querySelectorAll('details[data-op][open]').forEach(function (d) {
        var twin = fresh.querySelector('details[data-op="' + CSS.escape(d.dataset.op) + '"]');
        if (twin) {
          twin.open = true;
        }
      });
      old.querySelectorAll('[data-op] input:not([type=hidden]), [data-op] textarea').forEach(function (el) {
        if (!el.value) {
          return;
        }
        var k = key(el);
        fresh.querySelectorAll('[data-op] input, [data-op] textarea').forEach(function (f) {
          if (key(f) === k) {
            f.value = el.value;
          }
        });
      });
      old.replaceWith(fresh);
    });

    actions = document.getElementById('actions');
    shown = actions.dataset.version;
    if (focusKey) {
      document.querySelectorAll('[data-op] input, [data-op] textarea').forEach(function (f) {
        if (key(f) === focusKey) {
          f.focus();
          if (selStart !== null) {
            f.setSelectionRange(selStart, selStart);
          }
        }
      });
    }
    tick();
  }

  // span writes a duration as bee's command line does: 12s, 3m, 5h, 2d.
  function span(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) {
      return s + 's';
    }
    if (s < 3600) {
      return Math.floor(s / 60) + 'm';
    }
    if (s < 48 * 3600) {
      return Math.floor(s / 3600) + 'h';
    }
    return Math.floor(s / 86400) + 'd';
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll('time[data-since]').forEach(function (t) {
      t.textContent = span(now - Number(t.dataset.since));
    });
  }

  // showFlash puts the message a form's outcome brought at the top of the
  // page, in place of the last one; null just removes the last one.
  function showFlash(fresh) {
    var old = document.getElementById('flash');
    if (old) {
      old.remove();
    }
    if (fresh) {
      document.querySelector('header.top').after(fresh);
    }
  }

  // errorFlash makes a message that says something went wrong.
  function errorFlash(text) {
    var p = document.createElement('p');
    p.id = 'flash';
    p.className = 'flash error';
    p.setAttribute('role', 'alert');
    p.textContent = text;
    return p;
  }

  // The answer and decline forms of the For you section are sent in
  // place: the same POST, with the same fields and token, as without the
  // script, and the page the server then sends back is read only for its
  // message. The question leaves the page at the next change, as any
  // change does, and a half-typed answer elsewhere stays where it is.
  document.addEventListener('submit', function (e) {
    var form = e.target;
    if (!form.closest('#foryou') || !window.fetch || !window.DOMParser) {
      return; // an ordinary form: post, redirect, load
    }
    e.preventDefault();
    var button = form.querySelector('button[type=submit]');
    if (button.disabled) {
      return; // sent already
    }
    button.disabled = true;
    fetch(form.action, {
      method: 'POST',
      body: new URLSearchParams(new FormData(form)),
      credentials: 'same-origin',
      cache: 'no-store',
    })
      .then(function (res) {
        return res.text().then(function (html) {
          var doc = new DOMParser().parseFromString(html, 'text/html');
          if (res.ok) {
            var msg = doc.getElementById('flash');
            showFlash(msg ? document.importNode(msg, true) : null);
            return;
          }
          // A refusal (the session ended, the token is stale) says what
          // happened: show its words.
          var what = doc.querySelector('main h2');
          showFlash(errorFlash('Not sent (HTTP ' + res.status + ')' +
            (what ? ': ' + what.textContent.trim() : '.') + ' Reload the page.'));
        });
      })
      .catch(function () {
        showFlash(errorFlash('Not sent: bee serve did not answer. Is it still running? Try again, or reload.'));
      })
      .then(function () {
        button.disabled = false;
        refresh();
      });
  });

  events = new EventSource('/events');
  events.addEventListener('change', function (e) {
    setStatus('live', true);
    if (e.data !== shown) {
      refresh();
    }
  });
  events.addEventListener('open', function () {
    setStatus('live', true);
  });
  events.addEventListener('error', function () {
    if (events.readyState === EventSource.CLOSED) {
      setStatus('not live: bee serve has stopped or signed you out; reload', false);
    } else {
      setStatus('reconnecting…', false);
    }
  });
  setInterval(tick, 5000);
})();

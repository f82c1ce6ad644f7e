/* Examples you can run, "with my code", and your progress.
 *
 * On every page (Material's document$ fires on the first load and after each instant
 * navigation) this script reads what site/hooks/notebooks.py put in the page: the cells' sources
 * (<script id="course-cells">) and the markers around each example's rendering.
 *
 * Served by `nox -s course` (python -m live.course_server), the page carries
 * <meta name="course-live">; then every example gets Run and Edit, executed in a Jupyter kernel
 * on this machine through Jupyter's kernel API (REST /api/kernels + the kernel's websocket,
 * messaging protocol 5.3). One kernel per page: it starts on the first Run, runs the page's
 * earlier blocks first (the build ran them in one session too), and is deleted when the page is
 * left. The exercise box and the progress page poll the latest grading report.
 *
 * On a static site (no meta) nothing here makes a request: the run box says how to run the
 * examples, and the progress page shows the quiz results this browser kept.
 */
(() => {
  "use strict";

  // biome-ignore lint/suspicious/noControlCharactersInRegex: it removes the escapes that begin with ESC
  const ANSI = /\x1b\[[0-9;]*[A-Za-z]/g;
  const STUB_LINK = /course\/((?:chapters\/)?[\w.-]+)\.md#([\w-]+)/g;
  const QUIZ_PREFIX = "quiz_progress_"; // mkdocs_quiz keeps answers as localStorage[prefix + path]
  const REVEALED_PREFIX = "course_quiz_revealed_"; // quiz-retry.js: ids whose answer was shown
  const MISSED_PREFIX = "course_quiz_missed_"; // quiz-retry.js: ids whose first pick was wrong
  const POLL_MS = 2000;
  const GRADES_KEY = "course_grades"; // lessons' latest results, kept across grading runs

  let page = null; // the state of the page on screen

  // ------------------------------------------------------------------------ small helpers

  function liveConfig() {
    const meta = document.querySelector('meta[name="course-live"]');
    if (!meta) return null;
    try {
      return JSON.parse(meta.content);
    } catch {
      return null;
    }
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  }

  // Text with the stubs' "see course/chapters/NN-SLUG.md#SECTION" turned into links to the site's pages.
  function linkified(text, root) {
    return escapeHtml(text).replace(STUB_LINK, (match, path, anchor) => {
      const href = `${root}${path}/#${anchor}`;
      return `<a href="${escapeHtml(href)}">${escapeHtml(match)}</a>`;
    });
  }

  function uuid() {
    return crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2);
  }

  function when(iso) {
    return iso ? new Date(iso).toLocaleString() : "";
  }

  // ------------------------------------------------------------------------ the kernel

  class Kernel {
    constructor(live) {
      this.live = live;
      this.id = null;
      this.ws = null;
      this.session = uuid();
      this.handlers = new Map(); // msg_id -> callbacks
      this.dead = false;
    }

    async api(method, path, body) {
      const response = await fetch(path, {
        method,
        credentials: "same-origin",
        keepalive: method === "DELETE",
        headers: { "Content-Type": "application/json", "X-XSRFToken": this.live.xsrf },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (!response.ok && response.status !== 204) {
        throw new Error(`${method} ${path}: HTTP ${response.status}`);
      }
      return response.status === 204 ? null : response.json();
    }

    async start() {
      const model = await this.api("POST", "/api/kernels", { name: "python3" });
      this.id = model.id;
      const scheme = location.protocol === "https:" ? "wss:" : "ws:";
      const url = `${scheme}//${location.host}/api/kernels/${this.id}/channels?session_id=${this.session}`;
      this.ws = new WebSocket(url);
      await new Promise((resolve, reject) => {
        this.ws.onopen = resolve;
        this.ws.onerror = () => reject(new Error("cannot connect to the kernel"));
      });
      this.ws.onmessage = (event) => this.receive(JSON.parse(event.data));
      this.ws.onclose = () => this.died();
      await this.request("kernel_info_request", {}); // the kernel answers: it is ready
    }

    send(type, content, callbacks) {
      const msgId = uuid();
      this.handlers.set(msgId, callbacks);
      this.ws.send(
        JSON.stringify({
          header: {
            msg_id: msgId,
            msg_type: type,
            session: this.session,
            username: "",
            date: new Date().toISOString(),
            version: "5.3",
          },
          parent_header: {},
          metadata: {},
          content,
          channel: "shell",
          buffers: [],
        }),
      );
      return msgId;
    }

    request(type, content) {
      return new Promise((resolve) => {
        this.send(type, content, { output() {}, done: resolve, reply: true });
      });
    }

    // Resolves with the execute_reply's content once the kernel is idle again.
    execute(code, onOutput) {
      return new Promise((resolve) => {
        const state = { reply: null, idle: false };
        const finish = () => {
          if (state.reply && state.idle) {
            this.handlers.delete(msgId);
            resolve(state.reply);
          }
        };
        const msgId = this.send(
          "execute_request",
          {
            code,
            silent: false,
            store_history: true,
            user_expressions: {},
            allow_stdin: false,
            stop_on_error: true,
          },
          {
            output: onOutput,
            done: (reply) => {
              state.reply = reply;
              if (reply.status === "dead") state.idle = true;
              finish();
            },
            idle: () => {
              state.idle = true;
              finish();
            },
          },
        );
      });
    }

    // Every pending request ends as "dead": the kernel process is gone or being replaced.
    died() {
      this.dead = true;
      const pending = [...this.handlers.values()];
      this.handlers.clear();
      for (const callbacks of pending) callbacks.done({ status: "dead" });
    }

    receive(msg) {
      const type = msg.header.msg_type;
      const state = type === "status" && msg.content.execution_state;
      if (state === "restarting" || state === "autorestarting" || state === "dead") {
        this.died(); // the server's word: the process exited (a crash, os._exit, ...)
        return;
      }
      const callbacks = this.handlers.get(msg.parent_header?.msg_id);
      if (!callbacks) return;
      if (msg.channel === "shell") {
        if (callbacks.reply) this.handlers.delete(msg.parent_header.msg_id);
        callbacks.done(msg.content);
      } else if (msg.channel === "iopub") {
        if (type === "status") {
          if (msg.content.execution_state === "idle" && callbacks.idle) callbacks.idle();
        } else if (["stream", "display_data", "execute_result", "error"].includes(type)) {
          callbacks.output(type, msg.content);
        }
      }
    }

    interrupt() {
      return this.api("POST", `/api/kernels/${this.id}/interrupt`);
    }

    shutdown() {
      this.dead = true;
      if (this.ws) this.ws.close();
      if (!this.id) return;
      // A kernel the server is restarting (after a crash) refuses DELETE for a moment: retry.
      const attempt = (left) =>
        this.api("DELETE", `/api/kernels/${this.id}`).catch(() => {
          if (left > 0) setTimeout(() => attempt(left - 1), 1000);
        });
      attempt(10);
    }
  }

  // ------------------------------------------------------------------------ output areas

  class Output {
    constructor(area, cell, live, root) {
      this.area = area;
      this.cell = cell;
      this.live = live;
      this.root = root;
      this.chars = 0;
      this.stopped = false;
      this.stream = null; // the <pre> that consecutive stream text goes to
      this.html = ""; // what an HTML cell printed so far
      this.htmlBox = null;
    }

    budget(text) {
      if (this.stopped) return false;
      this.chars += text.length;
      if (this.chars > this.live.outputLimit * 1.2) {
        this.stopped = true;
        this.note("Output truncated: this block printed more than the page shows.");
        return false;
      }
      return true;
    }

    note(text, className = "course-live-note") {
      const box = el("div", className);
      box.innerHTML = linkified(text, this.root);
      this.area.append(box);
      this.stream = null;
      return box;
    }

    add(type, content) {
      if (type === "stream") {
        if (!this.budget(content.text)) return;
        if (this.cell.html && content.name === "stdout") {
          this.html += content.text;
          if (!this.htmlBox) {
            this.htmlBox = el("div", "course-live-html");
            this.area.append(this.htmlBox);
          }
          this.htmlBox.innerHTML = this.html;
          return;
        }
        if (!this.stream) {
          this.stream = el(
            "pre",
            content.name === "stderr" ? "course-live-stderr" : "course-live-stdout",
          );
          this.area.append(this.stream);
        }
        this.stream.textContent += content.text;
      } else if (type === "display_data" || type === "execute_result") {
        const data = content.data || {};
        this.stream = null;
        if (data["text/html"] || data["image/svg+xml"]) {
          const box = el("div", "course-live-html");
          box.innerHTML = data["text/html"] || data["image/svg+xml"];
          this.area.append(box);
        } else if (data["image/png"]) {
          const img = el("img", "course-live-image");
          img.src = `data:image/png;base64,${data["image/png"]}`;
          this.area.append(img);
        } else if (data["text/plain"] !== undefined && this.budget(data["text/plain"])) {
          this.area.append(el("pre", "course-live-stdout", data["text/plain"]));
        }
      } else if (type === "error") {
        const lines = (content.traceback || []).map((line) => line.replace(ANSI, ""));
        if (lines.length <= 1) {
          // One line: an unimplemented stub, or the output limit (live/kernel_setup.py).
          this.note(
            lines[0] || `${content.ename}: ${content.evalue}`,
            "course-live-note course-live-stub",
          );
        } else {
          const pre = el("pre", "course-live-error");
          pre.innerHTML = linkified(lines.join("\n"), this.root);
          this.area.append(pre);
          this.stream = null;
        }
      }
    }
  }

  // ------------------------------------------------------------------------ a page's cells

  class Page {
    constructor(live, payload) {
      this.live = live;
      this.payload = payload;
      this.root = payload.root || "";
      this.mode = "reference";
      this.kernel = null;
      this.starting = null;
      this.ran = []; // ran[i]: block i has run in the current kernel
      this.queue = Promise.resolve();
      this.cells = [];
      this.timers = [];
      this.closed = false;
    }

    setup() {
      const markers = document.querySelectorAll(".course-cell[data-cell]");
      for (const marker of markers) {
        const index = Number(marker.dataset.cell);
        const data = this.payload.cells[index];
        if (!data) continue;
        const parts = [];
        for (let node = marker.nextElementSibling; node; node = node.nextElementSibling) {
          if (node.classList.contains("course-cell-end") || node.classList.contains("course-cell"))
            break;
          parts.push(node);
        }
        const end = parts.length ? parts[parts.length - 1] : marker;
        const cell = { index, data, code: data.source, marker, parts, area: null, editor: null };
        const bar = el("div", "course-cell-bar");
        const run = el("button", "md-button md-button--primary course-run", "Run");
        run.type = "button";
        run.title =
          "Run this example (and the ones above it, the first time) in a kernel on your machine";
        const edit = el("button", "md-button course-edit", data.shown ? "Edit" : "Show code");
        edit.type = "button";
        const reset = el("button", "md-button course-reset", "Reset");
        reset.type = "button";
        reset.title = "Back to the page's own code";
        reset.hidden = true;
        const status = el("span", "course-cell-status");
        bar.append(run, edit, reset, status);
        marker.after(bar);
        const area = el("div", "course-live-output");
        area.hidden = true;
        (parts.length ? end : bar).after(area); // below the build's output, if it has one
        Object.assign(cell, { bar, run, edit, reset, status, area });
        run.addEventListener("click", () => this.runUpTo(index));
        edit.addEventListener("click", () => this.toggleEditor(cell));
        reset.addEventListener("click", () => {
          cell.code = data.source;
          if (cell.editor) this.toggleEditor(cell);
          reset.hidden = true;
        });
        this.cells[index] = cell;
      }
      this.panel();
    }

    panel() {
      const panel = document.querySelector(".course-run-panel");
      if (!panel) return;
      panel.hidden = false;
      panel.innerHTML = "";
      const label = el("label", "course-mine");
      const toggle = el("input");
      toggle.type = "checkbox";
      label.append(toggle, ` With my code (${this.live.exercises}/ in place of solutions)`);
      const all = el("button", "md-button course-run-all", "Run all");
      all.type = "button";
      this.kernelStatus = el("span", "course-kernel-status", "Kernel: starts on the first Run.");
      panel.append(all, label, this.kernelStatus);
      all.addEventListener("click", () => this.runUpTo(this.cells.length - 1, true));
      toggle.addEventListener("change", () => {
        this.mode = toggle.checked ? "mine" : "reference";
        this.resetKernel(`switched to ${toggle.checked ? "your code" : "the reference"}`);
        for (const cell of this.cells) if (cell) this.clearOutput(cell);
        this.runUpTo(this.cells.length - 1, true);
      });
    }

    toggleEditor(cell) {
      if (cell.editor) {
        cell.editor.remove();
        cell.editor = null;
        if (cell.data.shown && cell.parts[0]) cell.parts[0].hidden = false;
        cell.edit.textContent = cell.data.shown ? "Edit" : "Show code";
        return;
      }
      const editor = el("textarea", "course-editor");
      editor.value = cell.code;
      editor.spellcheck = false;
      editor.wrap = "off"; // Python's lines keep their meaning: a long one scrolls, never wraps
      editor.rows = Math.min(30, cell.code.split("\n").length + 1);
      editor.setAttribute("aria-label", `Code of example ${cell.index + 1}`);
      editor.addEventListener("input", () => {
        cell.code = editor.value;
        editor.rows = Math.min(30, cell.code.split("\n").length + 1);
        cell.reset.hidden = cell.code === cell.data.source;
      });
      editor.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && (event.shiftKey || event.ctrlKey)) {
          event.preventDefault();
          this.runUpTo(cell.index);
        }
      });
      if (cell.data.shown && cell.parts[0]) cell.parts[0].hidden = true;
      cell.bar.after(editor);
      cell.editor = editor;
      cell.edit.textContent = "Close editor";
      editor.focus();
    }

    clearOutput(cell) {
      cell.area.innerHTML = "";
      cell.area.hidden = true;
      delete cell.area.dataset.status;
      cell.status.textContent = "";
    }

    setKernelStatus(text) {
      if (this.kernelStatus) this.kernelStatus.textContent = text;
    }

    resetKernel(why) {
      if (this.kernel) this.kernel.shutdown();
      this.kernel = null;
      this.starting = null;
      this.ran = [];
      this.setKernelStatus(`Kernel: stopped (${why}); a new one starts on the next Run.`);
    }

    async ensureKernel() {
      if (this.kernel && !this.kernel.dead) return this.kernel;
      if (!this.starting) {
        this.starting = (async () => {
          this.ran = [];
          this.setKernelStatus("Kernel: starting…");
          const kernel = new Kernel(this.live);
          await kernel.start();
          if (this.closed) {
            kernel.shutdown();
            throw new Error("page closed");
          }
          const problems = [];
          const reply = await kernel.execute(this.live.setup[this.mode], (type, content) => {
            if (type === "error") problems.push(`${content.ename}: ${content.evalue}`);
            if (type === "stream" && content.name === "stderr") problems.push(content.text);
          });
          if (reply.status !== "ok") {
            kernel.shutdown();
            throw new Error(problems.join("\n") || "the kernel's setup failed");
          }
          this.kernel = kernel;
          const which =
            this.mode === "mine"
              ? `your code (${this.live.exercises}/)`
              : "the reference solutions";
          this.setKernelStatus(`Kernel: running, with ${which}.`);
          return kernel;
        })();
        this.starting.catch(() => {
          this.starting = null;
        });
      }
      return this.starting;
    }

    runUpTo(index, all = false) {
      for (let i = 0; i <= index; i++) {
        const cell = this.cells[i];
        if (cell && (i === index || all || !this.ran[i])) cell.status.textContent = "queued…";
      }
      this.queue = this.queue.then(async () => {
        let kernel;
        try {
          kernel = await this.ensureKernel();
        } catch (error) {
          const cell = this.cells[index];
          if (cell) {
            this.clearOutput(cell);
            cell.area.hidden = false;
            new Output(cell.area, cell.data, this.live, this.root).note(
              `Cannot run: ${error.message}`,
            );
          }
          this.setKernelStatus("Kernel: failed to start.");
          return;
        }
        for (let i = 0; i <= index; i++) {
          const cell = this.cells[i];
          if (!cell || (this.ran[i] && i !== index && !all)) continue;
          await this.runCell(kernel, cell); // an error stays in its block; the next still run
          if (this.kernel !== kernel) break;
        }
      });
      return this.queue;
    }

    async runCell(kernel, cell) {
      this.clearOutput(cell);
      cell.area.hidden = false;
      const label = this.mode === "mine" ? "Your code" : "Live output";
      cell.area.append(el("div", "course-live-label", label));
      const output = new Output(cell.area, cell.data, this.live, this.root);
      cell.status.textContent = "running…";
      cell.run.disabled = true;
      let stopped = false;
      const timer = setTimeout(() => {
        stopped = true;
        output.note(`Stopped: this block ran for more than ${this.live.timeout} s.`);
        kernel.interrupt().catch(() => {});
        // A block that ignores the interrupt (stuck in C code): start afresh.
        this.timers.push(
          setTimeout(() => {
            if (this.kernel === kernel && cell.status.textContent === "running…") {
              this.resetKernel("it did not stop when interrupted");
              output.note(
                "The kernel did not stop and was restarted; Run runs the blocks above again.",
              );
            }
          }, 10000),
        );
      }, this.live.timeout * 1000);
      this.timers.push(timer);
      const reply = await kernel.execute(cell.code, (type, content) => output.add(type, content));
      clearTimeout(timer);
      cell.run.disabled = false;
      const ok = reply.status === "ok";
      this.ran[cell.index] = reply.status !== "dead";
      cell.status.textContent = ok
        ? "done"
        : stopped
          ? "stopped"
          : reply.status === "dead"
            ? "kernel stopped"
            : "error";
      cell.area.dataset.status = cell.status.textContent;
      if (reply.status === "dead" && this.kernel === kernel) {
        this.resetKernel("the kernel died");
        output.note(
          "The kernel stopped while this block ran (it crashed or exited). The next Run starts " +
            "a new one and runs the blocks above first.",
        );
      }
      return ok;
    }

    close() {
      this.closed = true;
      for (const timer of this.timers) clearTimeout(timer);
      if (this.kernel) this.kernel.shutdown();
      if (this.starting) this.starting.then((kernel) => kernel.shutdown()).catch(() => {});
    }
  }

  // ------------------------------------------------------------------------ progress

  function quizResults() {
    // mkdocs_quiz stores {quizId: {answered, correct}} under the chapter page's path, and
    // quiz-retry.js the ids of the questions whose answer was revealed (revealed, not right) and
    // of those whose first pick was wrong (right after a wrong pick, not right the first time).
    const ids = (key) => {
      const value = JSON.parse(localStorage.getItem(key) || "[]");
      return Array.isArray(value) ? value : [];
    };
    const results = {};
    for (let i = 0; i < localStorage.length; i++) {
      const key = localStorage.key(i);
      if (!key || !key.startsWith(QUIZ_PREFIX)) continue;
      try {
        const path = key.slice(QUIZ_PREFIX.length);
        const quizzes = Object.entries(JSON.parse(localStorage.getItem(key)) || {});
        const revealed = ids(REVEALED_PREFIX + path);
        const missed = ids(MISSED_PREFIX + path);
        const answered = quizzes.filter(([, q]) => q.answered);
        const right = answered.filter(([id, q]) => q.correct && !revealed.includes(id));
        results[path] = {
          total: quizzes.length,
          answered: answered.length,
          first: right.filter(([id]) => !missed.includes(id)).length,
          later: right.filter(([id]) => missed.includes(id)).length,
          revealed: answered.filter(([id]) => revealed.includes(id)).length,
        };
      } catch {
        /* a malformed entry is mkdocs_quiz's to clear */
      }
    }
    return results;
  }

  function pagePath(root, page) {
    return new URL(root + page.replace(/\.md$/, "/"), location.href).pathname;
  }

  // "(windows.py, line 12)": where the grader saw the failure, from the end of a check's detail.
  function failedAt(text) {
    const found = /\(([^()]+\.py), line (\d+)\)\s*$/.exec(text || "");
    return found ? ` (${found[1]}, line ${found[2]})` : "";
  }

  function checkList(lesson, root) {
    const list = el("ul", "course-checks");
    if (lesson.import_error) {
      // The module did not import (a SyntaxError, a missing name): one line, with its place.
      const item = el("li", "course-check course-check--failed course-check--import");
      item.innerHTML =
        `<span class="course-check__mark">✗</span> failed to import: ` +
        `<span class="course-check__hint">${escapeHtml(lesson.import_error)}</span>`;
      list.append(item);
    }
    for (const check of lesson.checks) {
      const item = el(
        "li",
        check.passed ? "course-check course-check--passed" : "course-check course-check--failed",
      );
      const mark = check.passed ? "✓" : "✗";
      const name = check.id + (check.hidden ? " (hidden)" : "");
      item.innerHTML =
        `<span class="course-check__mark">${mark}</span> <code>${escapeHtml(name)}</code> ` +
        `<span class="course-check__fn">${escapeHtml(check.function)}</span> ` +
        `<span class="course-check__points">${check.points}/${check.max_points}</span>`;
      if (!check.passed) {
        const hint = el("div", "course-check__hint");
        const line = check.hint || (check.detail || "failed").split("\n")[0];
        hint.innerHTML =
          escapeHtml(line + failedAt(check.detail)) +
          (check.url ? ` — <a href="${escapeHtml(root + check.url)}">read the section</a>` : "");
        item.append(hint);
      }
      list.append(item);
    }
    return list;
  }

  function lessonStatus(lesson) {
    if (!lesson) return ["not graded yet", "none"];
    if (lesson.max_points && lesson.points === lesson.max_points) return ["done", "done"];
    const left = lesson.checks.filter((c) => !c.passed).length;
    return [`to do: ${left} of ${lesson.checks.length} checks`, "todo"];
  }

  // The report keeps every lesson graded so far, each with when (`graded`); the browser keeps
  // each lesson's latest result too (per graded package), for a report that starts over.
  function remembered(state) {
    let kept = {};
    try {
      kept = JSON.parse(localStorage.getItem(GRADES_KEY)) || {};
    } catch {
      kept = {};
    }
    const report = state?.report;
    if (!report) return kept.lessons || {};
    if (kept.target !== report.target) kept = { target: report.target, lessons: {} };
    for (const lesson of report.lessons) {
      kept.lessons[lesson.slug] = { lesson, graded: lesson.graded || state.graded };
    }
    try {
      localStorage.setItem(GRADES_KEY, JSON.stringify(kept));
    } catch {
      /* storage full or disabled: show this run only */
    }
    return kept.lessons;
  }

  function renderProgress(container, state) {
    const root = container.dataset.root || "";
    const lessons = JSON.parse(container.dataset.lessons || "[]");
    const quizzes = quizResults();
    const report = state?.report;
    const kept = state ? remembered(state) : {};
    const graded = {};
    const times = {};
    for (const [slug, entry] of Object.entries(kept)) {
      graded[slug] = entry.lesson;
      times[slug] = entry.graded;
    }
    if (report) {
      for (const lesson of report.lessons) {
        graded[lesson.slug] = lesson;
        times[lesson.slug] = lesson.graded || state.graded;
      }
    }
    container.innerHTML = "";
    container.dataset.complete = String(!report || report.complete);
    const summary = el("p", "course-progress__summary");
    if (!state) {
      summary.innerHTML =
        "Grading results appear here when the course is served on your machine " +
        "(<code>nox -s course</code>); grade with <code>nox -s grade</code>.";
    } else if (state.error) {
      summary.textContent = `The grading report could not be read: ${state.error}`;
    } else if (!report) {
      summary.innerHTML =
        "No grading report yet: run <code>nox -s grade</code>; this page updates when it finishes each check.";
    } else {
      const running = report.complete ? "" : " (grading is still running…)";
      summary.innerHTML =
        `Last graded <strong>${escapeHtml(when(state.graded))}</strong>${running}: ` +
        `<strong>${report.points}/${report.max_points}</strong> points ` +
        `(${report.hidden ? "public and hidden" : "public"} checks).`;
    }
    container.append(summary);
    const table = el("table", "course-progress__table");
    table.innerHTML =
      "<thead><tr><th>Lesson</th><th>Points</th><th>Status</th><th>Graded</th><th>Quiz</th></tr></thead>";
    const body = el("tbody");
    for (const info of lessons) {
      const lesson = graded[info.slug];
      const [status, kind] = lessonStatus(lesson);
      const quizText = quizLine(quizzes[pagePath(root, info.page)], info.quizzes);
      const row = el("tr", `course-progress__row course-progress__row--${kind}`);
      row.dataset.lesson = info.slug;
      row.innerHTML =
        `<td><a href="${escapeHtml(root + info.page.replace(/\.md$/, "/"))}">${info.number}. ${escapeHtml(info.title)}</a></td>` +
        `<td class="course-progress__points">${lesson ? `${lesson.points}/${lesson.max_points}` : "–"}</td>` +
        `<td>${escapeHtml(status)}</td><td class="course-progress__when">${escapeHtml(when(times[info.slug]))}</td>` +
        `<td class="course-progress__quiz">${escapeHtml(quizText)}</td>`;
      body.append(row);
      if (lesson?.checks.length) {
        const detail = el("tr", "course-progress__checks");
        const cell = el("td");
        cell.colSpan = 5;
        const details = el("details");
        if (kind !== "done") details.open = true;
        details.append(
          el("summary", "", `Checks of lesson ${info.number}`),
          checkList(lesson, root),
        );
        cell.append(details);
        detail.append(cell);
        body.append(detail);
      }
    }
    // The primer's and the "More" pages' quizzes: no exercise to grade, the same quiz column.
    for (const info of JSON.parse(container.dataset.pages || "[]")) {
      const row = el("tr", "course-progress__row course-progress__row--page");
      row.dataset.page = info.page;
      row.innerHTML =
        `<td><a href="${escapeHtml(root + info.page.replace(/\.md$/, "/"))}">${escapeHtml(info.title)}</a></td>` +
        '<td class="course-progress__points">–</td><td>no exercise</td>' +
        '<td class="course-progress__when">–</td>' +
        `<td class="course-progress__quiz">${escapeHtml(quizLine(quizzes[pagePath(root, info.page)], info.quizzes))}</td>`;
      body.append(row);
    }
    table.append(body);
    container.append(table);
  }

  // A page's quiz results in the words quiz-retry.js uses under the page's own deck.
  function quizLine(quiz, count) {
    const total = count || 0; // mkdocs_quiz stores only the answered ones
    if (!total) return "no quiz";
    if (!quiz?.answered) return `${total} to try`;
    return (
      `${quiz.first} of ${total} right the first time` +
      (quiz.later ? `, ${quiz.later} right after a wrong pick` : "") +
      (quiz.revealed ? `, ${quiz.revealed} revealed` : "")
    );
  }

  function renderBox(box, lessonSlug, state, root) {
    const kept = remembered(state)[lessonSlug];
    const lesson = kept?.lesson;
    const complete = !state.report || state.report.complete;
    box.dataset.complete = String(complete);
    box.innerHTML = "";
    box.append(el("p", "course-progress-box__title", "Your last grading"));
    if (!lesson) {
      box.append(el("p", "", `Not graded yet: run nox -s grade -- ${lessonSlug}.`));
      return;
    }
    const [status] = lessonStatus(lesson);
    const line = el("p", "course-progress-box__line");
    line.innerHTML =
      `<strong class="course-progress-box__points">${lesson.points}/${lesson.max_points}</strong> points, ` +
      `${escapeHtml(status)} <span class="course-progress-box__when">(graded ${escapeHtml(when(kept.graded))}` +
      `${complete ? "" : "; grading is still running…"})</span>`;
    box.append(line, checkList(lesson, root));
  }

  function follow(live, render) {
    // Poll the report; render when it changed (and once at the start).
    let last = null;
    const tick = async () => {
      try {
        const response = await fetch(live.report, {
          credentials: "same-origin",
          cache: "no-store",
        });
        if (!response.ok) return;
        const state = await response.json();
        const key = JSON.stringify([
          state.graded,
          state.error,
          state.report?.points,
          state.report?.complete,
        ]);
        if (key !== last) {
          last = key;
          render(state);
        }
      } catch {
        /* the server stopped: keep what is shown */
      }
    };
    tick();
    return setInterval(tick, POLL_MS);
  }

  // ------------------------------------------------------------------------ per page

  function init() {
    if (page) page.close();
    page = null;
    const live = liveConfig();
    const intervals = [];
    const script = document.getElementById("course-cells");
    let payload = null;
    if (script) {
      try {
        payload = JSON.parse(script.textContent);
      } catch {
        payload = null;
      }
    }
    if (live && payload) {
      page = new Page(live, payload);
      page.setup();
    }
    const progress = document.querySelector(".course-progress");
    if (progress) {
      renderProgress(progress, null);
      if (live) intervals.push(follow(live, (state) => renderProgress(progress, state)));
    }
    const exercise = document.querySelector("article .admonition.exercise");
    if (live && payload && payload.lesson && exercise) {
      const box = el("div", "course-progress-box");
      exercise.append(box);
      intervals.push(
        follow(live, (state) => renderBox(box, payload.lesson, state, payload.root || "")),
      );
    }
    if (intervals.length) {
      const stop = () => intervals.forEach(clearInterval);
      if (page) {
        const close = page.close.bind(page);
        page.close = () => {
          stop();
          close();
        };
      } else {
        page = { close: stop };
      }
    }
  }

  window.addEventListener("pagehide", () => {
    if (page) page.close();
    page = null;
  });

  if (typeof document$ !== "undefined") {
    document$.subscribe(init); // Material: first load and every instant navigation
  } else {
    document.addEventListener("DOMContentLoaded", init);
  }
})();

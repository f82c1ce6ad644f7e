/* Quizzes you can retry.
 *
 * mkdocs_quiz runs with show_correct and disable_after_submit off (mkdocs.yml): a wrong pick
 * shows that answer's own explanation and the question stays open. This script adds the rest:
 * a line under a wrong pick inviting another try, with a "Show the answer" button, and after
 * a second wrong pick on the same question it reveals the right answer and its explanation.
 *
 * It listens for the quiz form's submit event on the document in the capture phase (quiz.js
 * stops the event from bubbling) and acts once quiz.js has drawn its feedback (setTimeout 0).
 * The feedback box is redrawn by quiz.js on every pick, so nothing here outlives a pick.
 *
 * A revealed answer counts as revealed, not as correct: the question closes (no pick after the
 * answer is shown, so quiz.js keeps it as answered wrongly), its id is kept in
 * localStorage[REVEALED_PREFIX + page path] (run.js's progress page reads it there too) and the
 * quiz sidebar shows how many answers were revealed. quiz.js's own reset clears the mark.
 *
 * A question whose first pick was wrong is kept in localStorage[MISSED_PREFIX + page path]:
 * quiz.js counts a right second pick as right, but guessing twice among four options finds the
 * answer half the time, so the sidebar (and run.js's progress page) tell "right the first
 * time" from "right after a wrong pick". Only the reset of every question (quiz.js's "Reset",
 * once confirmed) forgets these marks; "Try Again" on one question does not.
 */
(() => {
  "use strict";

  const REVEAL_AFTER = 2; // wrong picks on one question before the answer is shown unasked
  const REVEALED_PREFIX = "course_quiz_revealed_"; // + page path: ids of the revealed questions
  const MISSED_PREFIX = "course_quiz_missed_"; // + page path: ids whose first pick was wrong
  const ANSWERS_PREFIX = "quiz_progress_"; // + page path: quiz.js's {id: {answered, correct}}

  function stored(key, fallback) {
    try {
      const value = JSON.parse(localStorage.getItem(key));
      return value === null ? fallback : value;
    } catch {
      return fallback;
    }
  }

  // The revealed ids of this page that quiz.js still holds as answered (its reset forgets both).
  function revealedIds() {
    const ids = stored(REVEALED_PREFIX + location.pathname, []);
    const answered = stored(ANSWERS_PREFIX + location.pathname, {});
    return Array.isArray(ids) ? ids.filter((id) => answered[id]?.answered) : [];
  }

  function save(prefix, ids) {
    try {
      localStorage.setItem(prefix + location.pathname, JSON.stringify(ids));
    } catch {
      /* storage full or disabled: the mark lasts until the page is left */
    }
  }

  function saveRevealed(ids) {
    save(REVEALED_PREFIX, ids);
  }

  // The ids of this page whose first pick was wrong (kept through "Try Again" on one question).
  function missedIds() {
    const ids = stored(MISSED_PREFIX + location.pathname, []);
    return Array.isArray(ids) ? ids : [];
  }

  function markMissed(quiz) {
    const ids = missedIds();
    if (quiz.id && ids.indexOf(quiz.id) === -1) save(MISSED_PREFIX, ids.concat([quiz.id]));
  }

  // Right the first time, right after a wrong pick, and revealed, among the answered questions.
  function counts() {
    const answered = stored(ANSWERS_PREFIX + location.pathname, {});
    const revealed = revealedIds();
    const missed = missedIds();
    let first = 0;
    let later = 0;
    Object.keys(answered).forEach((id) => {
      const answer = answered[id];
      if (!answer || !answer.answered || !answer.correct || revealed.indexOf(id) !== -1) return;
      if (missed.indexOf(id) === -1) first += 1;
      else later += 1;
    });
    return { first: first, later: later, revealed: revealed.length };
  }

  const LINES = [
    ["first", "Right the first time: "],
    ["later", "Right after a wrong pick: "],
    ["revealed", "Revealed: "],
  ];

  // The one wording of the counts, as the progress page (run.js) words them too.
  function summary(numbers, total) {
    return (
      `${numbers.first} of ${total} right the first time` +
      (numbers.later ? `, ${numbers.later} right after a wrong pick` : "") +
      (numbers.revealed ? `, ${numbers.revealed} revealed` : "")
    );
  }

  // The box under the deck (quiz.js's #quiz-results): its "N correct" and its final score count
  // a right second pick as right, so course.css hides them and this line says what the sidebar
  // says.
  function showSummary(numbers) {
    const results = document.getElementById("quiz-results");
    if (!results) return;
    let line = results.querySelector(".quiz-results-course");
    if (!line) {
      line = document.createElement("p");
      line.className = "quiz-results-course";
      results.appendChild(line);
    }
    line.textContent = summary(numbers, document.querySelectorAll("article .quiz").length);
  }

  // The sidebar's lines, in place of quiz.js's "Correct" (which counts a right second pick as
  // right, so it is hidden: one count in every place).
  function showCounts() {
    const numbers = counts();
    showSummary(numbers);
    document.querySelectorAll('[data-md-component="quiz-progress"]').forEach((panel) => {
      panel.querySelectorAll(".quiz-progress-score").forEach((score) => {
        const line = score.closest(".md-ellipsis");
        if (line) line.classList.add("quiz-progress-correct-hidden");
      });
      LINES.forEach((entry) => {
        let number = panel.querySelector(`.quiz-progress-${entry[0]}`);
        if (!number) {
          const line = document.createElement("span");
          line.className = `md-ellipsis quiz-progress-${entry[0]}-line`;
          line.appendChild(document.createTextNode(entry[1]));
          number = document.createElement("span");
          number.className = `quiz-progress-${entry[0]}`;
          line.appendChild(number);
          const reset = panel.querySelector(".quiz-correct-reset");
          if (panel.tagName === "UL") {
            const item = document.createElement("li");
            item.className = "md-nav__item";
            const link = document.createElement("div");
            link.className = "md-nav__link";
            link.appendChild(line);
            item.appendChild(link);
            // Above the line that holds quiz.js's "Reset" link, which ends the panel.
            const last = reset?.closest("li");
            if (last && last.parentElement === panel) panel.insertBefore(item, last);
            else panel.appendChild(item);
          } else if (reset) {
            reset.insertBefore(line, reset.querySelector(".quiz-reset-all-link"));
          } else {
            panel.appendChild(line);
          }
        }
        number.textContent = String(numbers[entry[0]]);
      });
    });
  }

  // A revealed question is closed: its answers can no longer be picked or reset one by one.
  function close(quiz) {
    quiz.classList.add("quiz--revealed");
    answers(quiz).forEach((input) => {
      input.disabled = true;
    });
    quiz.querySelectorAll('.quiz-reset-button, button[type="submit"]').forEach((button) => {
      button.classList.add("hidden");
    });
  }

  function choiceQuiz(element) {
    const quiz = element?.closest ? element.closest(".quiz") : null;
    if (!quiz || quiz.getAttribute("data-quiz-type") === "fill-blank") return null;
    return quiz.querySelector('fieldset input[name="answer"]') ? quiz : null;
  }

  function answers(quiz) {
    return Array.prototype.slice.call(quiz.querySelectorAll('fieldset input[name="answer"]'));
  }

  function answeredRight(quiz) {
    return answers(quiz).every((input) => input.checked === input.hasAttribute("data-correct"));
  }

  function feedbackBox(quiz) {
    return quiz.querySelector(".quiz-feedback");
  }

  function item(kind, html) {
    const box = document.createElement("div");
    box.className = `quiz-feedback-item ${kind}`;
    const content = document.createElement("div");
    content.className = "quiz-feedback-item-content";
    content.innerHTML = html;
    box.appendChild(content);
    return box;
  }

  function reveal(quiz) {
    const feedback = feedbackBox(quiz);
    if (!feedback || feedback.querySelector(".quiz-revealed")) return;
    const parts = answers(quiz)
      .filter((input) => input.hasAttribute("data-correct"))
      .map((input) => {
        input.parentElement.classList.add("correct", "quiz-answer-revealed");
        const label = input.parentElement.querySelector("label");
        const why = input.parentElement.querySelector(".answer-feedback");
        return (
          "<strong>The answer:</strong> " +
          (label ? label.innerHTML : "") +
          (why?.innerHTML.trim() ? `<div class="quiz-revealed-why">${why.innerHTML}</div>` : "")
        );
      });
    const retry = feedback.querySelector(".quiz-retry");
    if (retry) retry.remove();
    const box = item("correct quiz-revealed", parts.join("<br>"));
    feedback.appendChild(box);
    feedback.classList.remove("hidden");
    close(quiz);
    const ids = revealedIds();
    if (quiz.id && ids.indexOf(quiz.id) === -1) saveRevealed(ids.concat([quiz.id]));
    showCounts();
  }

  function invite(quiz) {
    const feedback = feedbackBox(quiz);
    if (!feedback || feedback.querySelector(".quiz-retry")) return;
    const auto =
      quiz.hasAttribute("data-auto-submit") && !quiz.querySelector('input[type="checkbox"]');
    const note = document.createElement("p");
    note.className = "quiz-retry";
    note.appendChild(
      document.createTextNode(
        auto
          ? "Pick another answer to try again, or "
          : "Press \u201cTry Again\u201d to change your answer, or ",
      ),
    );
    const button = document.createElement("button");
    button.type = "button";
    button.className = "quiz-show-answer";
    button.textContent = "show the answer";
    note.appendChild(button);
    note.appendChild(document.createTextNode("."));
    feedback.appendChild(note);
  }

  function afterPick(quiz) {
    if (answeredRight(quiz)) {
      showCounts();
      return;
    }
    markMissed(quiz);
    const wrong = Number(quiz.dataset.wrongPicks || 0) + 1;
    quiz.dataset.wrongPicks = String(wrong);
    if (wrong >= REVEAL_AFTER) reveal(quiz);
    else invite(quiz);
    showCounts();
  }

  document.addEventListener(
    "submit",
    (event) => {
      const quiz = choiceQuiz(event.target);
      if (quiz) {
        setTimeout(() => {
          afterPick(quiz);
        }, 0);
      }
    },
    true,
  );

  document.addEventListener("click", (event) => {
    const button = event.target.closest ? event.target.closest(".quiz-show-answer") : null;
    const quiz = button ? choiceQuiz(button) : null;
    if (quiz) reveal(quiz);
    // quiz.js's "Reset" (all questions, after its confirm()) forgets the answers: forget the
    // revealed marks with them, and reopen the questions.
    if (event.target.closest?.('[class*="reset"]')) {
      setTimeout(() => {
        const ids = revealedIds();
        saveRevealed(ids);
        // Every question reset (the confirmed "Reset"): their first picks are to come again.
        if (!Object.keys(stored(ANSWERS_PREFIX + location.pathname, {})).length) {
          save(MISSED_PREFIX, []);
        }
        document.querySelectorAll(".quiz.quiz--revealed").forEach((closed) => {
          if (ids.indexOf(closed.id) === -1) {
            closed.classList.remove("quiz--revealed");
            delete closed.dataset.wrongPicks;
            answers(closed).forEach((input) => {
              input.disabled = false;
            });
          }
        });
        showCounts();
      }, 0);
    }
  });

  // Restored from an earlier visit (quiz.js keeps answers in localStorage): a revealed question
  // is revealed again, and a wrong pick counts as the first try, inviting a second one.
  function restore() {
    const ids = revealedIds();
    document.querySelectorAll(".quiz").forEach((element) => {
      const quiz = choiceQuiz(element);
      if (!quiz) return;
      if (ids.indexOf(quiz.id) !== -1) {
        reveal(quiz);
      } else if (!quiz.dataset.wrongPicks && quiz.querySelector("fieldset > div.wrong")) {
        quiz.dataset.wrongPicks = "1";
        markMissed(quiz);
        invite(quiz);
      }
    });
    showCounts();
  }

  if (typeof document$ !== "undefined") {
    document$.subscribe(() => {
      setTimeout(restore, 0);
    });
  } else {
    document.addEventListener("DOMContentLoaded", () => {
      setTimeout(restore, 0);
    });
  }
})();

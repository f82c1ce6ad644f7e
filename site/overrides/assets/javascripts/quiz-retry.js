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
 */
(function () {
  "use strict";

  var REVEAL_AFTER = 2; // wrong picks on one question before the answer is shown unasked

  function choiceQuiz(element) {
    var quiz = element && element.closest ? element.closest(".quiz") : null;
    if (!quiz || quiz.getAttribute("data-quiz-type") === "fill-blank") return null;
    return quiz.querySelector('fieldset input[name="answer"]') ? quiz : null;
  }

  function answers(quiz) {
    return Array.prototype.slice.call(quiz.querySelectorAll('fieldset input[name="answer"]'));
  }

  function answeredRight(quiz) {
    return answers(quiz).every(function (input) {
      return input.checked === input.hasAttribute("data-correct");
    });
  }

  function feedbackBox(quiz) {
    return quiz.querySelector(".quiz-feedback");
  }

  function item(kind, html) {
    var box = document.createElement("div");
    box.className = "quiz-feedback-item " + kind;
    var content = document.createElement("div");
    content.className = "quiz-feedback-item-content";
    content.innerHTML = html;
    box.appendChild(content);
    return box;
  }

  function reveal(quiz) {
    var feedback = feedbackBox(quiz);
    if (!feedback || feedback.querySelector(".quiz-revealed")) return;
    var parts = answers(quiz)
      .filter(function (input) {
        return input.hasAttribute("data-correct");
      })
      .map(function (input) {
        input.parentElement.classList.add("correct", "quiz-answer-revealed");
        var label = input.parentElement.querySelector("label");
        var why = input.parentElement.querySelector(".answer-feedback");
        return (
          "<strong>The answer:</strong> " +
          (label ? label.innerHTML : "") +
          (why && why.innerHTML.trim() ? '<div class="quiz-revealed-why">' + why.innerHTML + "</div>" : "")
        );
      });
    var retry = feedback.querySelector(".quiz-retry");
    if (retry) retry.remove();
    var box = item("correct quiz-revealed", parts.join("<br>"));
    feedback.appendChild(box);
    feedback.classList.remove("hidden");
  }

  function invite(quiz) {
    var feedback = feedbackBox(quiz);
    if (!feedback || feedback.querySelector(".quiz-retry")) return;
    var auto = quiz.hasAttribute("data-auto-submit") && !quiz.querySelector('input[type="checkbox"]');
    var note = document.createElement("p");
    note.className = "quiz-retry";
    note.appendChild(
      document.createTextNode(
        auto ? "Pick another answer to try again, or " : "Press \u201cTry Again\u201d to change your answer, or ",
      ),
    );
    var button = document.createElement("button");
    button.type = "button";
    button.className = "quiz-show-answer";
    button.textContent = "show the answer";
    note.appendChild(button);
    note.appendChild(document.createTextNode("."));
    feedback.appendChild(note);
  }

  function afterPick(quiz) {
    if (answeredRight(quiz)) return;
    var wrong = Number(quiz.dataset.wrongPicks || 0) + 1;
    quiz.dataset.wrongPicks = String(wrong);
    if (wrong >= REVEAL_AFTER) reveal(quiz);
    else invite(quiz);
  }

  document.addEventListener(
    "submit",
    function (event) {
      var quiz = choiceQuiz(event.target);
      if (quiz) {
        setTimeout(function () {
          afterPick(quiz);
        }, 0);
      }
    },
    true,
  );

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest(".quiz-show-answer") : null;
    var quiz = button ? choiceQuiz(button) : null;
    if (quiz) reveal(quiz);
  });

  // A wrong pick restored from an earlier visit (quiz.js keeps answers in localStorage) counts
  // as the first try: invite a second one.
  function restore() {
    document.querySelectorAll(".quiz").forEach(function (element) {
      var quiz = choiceQuiz(element);
      if (quiz && !quiz.dataset.wrongPicks && quiz.querySelector("fieldset > div.wrong")) {
        quiz.dataset.wrongPicks = "1";
        invite(quiz);
      }
    });
  }

  if (typeof document$ !== "undefined") {
    document$.subscribe(function () {
      setTimeout(restore, 0);
    });
  } else {
    document.addEventListener("DOMContentLoaded", function () {
      setTimeout(restore, 0);
    });
  }
})();

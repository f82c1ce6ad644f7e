/* Quizzes one question at a time, their options in an order of the reader's own.
 *
 * Consecutive quizzes of a page (the questions under "Check what you learned") become one deck:
 * a single question shows, with "Previous" and "Next" buttons and "Question k of n". The deck
 * opens on the first question not answered yet (quiz.js restores earlier answers from
 * localStorage before this runs), and on the question a link's #quiz-N points at.
 *
 * The options of every question are shuffled, the same way on every visit of one reader and a
 * different way for another: the order comes from a random number drawn once per browser
 * (localStorage[READER_KEY]), the page's path and the question's id. quiz.js names an answer by
 * its value, never by its place, so the order does not disturb its grading or its restore.
 */
(() => {
  "use strict";

  const READER_KEY = "course_quiz_reader";

  function readerSeed() {
    try {
      let seed = localStorage.getItem(READER_KEY);
      if (!seed) {
        seed = String(Math.floor(Math.random() * 4294967296));
        localStorage.setItem(READER_KEY, seed);
      }
      return seed;
    } catch {
      return "0"; // no storage: one fixed order, still not the order of the source
    }
  }

  // A small seeded generator (FNV-1a of the text, then mulberry32): uniform enough to shuffle
  // four options, and the same numbers in every browser.
  function generator(text) {
    let state = 2166136261;
    for (let i = 0; i < text.length; i++) {
      state = Math.imul(state ^ text.charCodeAt(i), 16777619) >>> 0;
    }
    return () => {
      state = (state + 0x6d2b79f5) >>> 0;
      let t = state;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  function shuffleOptions(quiz, seed) {
    const fieldset = quiz.querySelector("form fieldset");
    if (!fieldset || quiz.dataset.shuffled) return;
    const options = Array.prototype.slice.call(fieldset.querySelectorAll(":scope > div"));
    const random = generator(`${seed} ${location.pathname} ${quiz.id}`);
    for (let i = options.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      const swap = options[i];
      options[i] = options[j];
      options[j] = swap;
    }
    options.forEach((option) => {
      fieldset.appendChild(option);
    });
    quiz.dataset.shuffled = "true";
  }

  function answered(quiz) {
    const feedback = quiz.querySelector(".quiz-feedback");
    return !!feedback && !feedback.classList.contains("hidden");
  }

  function button(label, className) {
    const element = document.createElement("button");
    element.type = "button";
    element.className = `quiz-deck__button ${className}`;
    element.textContent = label;
    return element;
  }

  function makeDeck(quizzes) {
    const deck = document.createElement("div");
    deck.className = "quiz-deck";
    quizzes[0].parentNode.insertBefore(deck, quizzes[0]);
    quizzes.forEach((quiz) => {
      deck.appendChild(quiz);
    });
    const nav = document.createElement("div");
    nav.className = "quiz-deck__nav";
    const previous = button("Previous", "quiz-deck__previous");
    const next = button("Next", "quiz-deck__next");
    const where = document.createElement("span");
    where.className = "quiz-deck__where";
    where.setAttribute("aria-live", "polite");
    nav.appendChild(previous);
    nav.appendChild(where);
    nav.appendChild(next);
    deck.appendChild(nav);

    let current = 0;
    function show(index) {
      current = Math.max(0, Math.min(quizzes.length - 1, index));
      quizzes.forEach((quiz, i) => {
        quiz.classList.toggle("quiz-deck__off", i !== current);
      });
      where.textContent = `Question ${current + 1} of ${quizzes.length}`;
      previous.disabled = current === 0;
      next.disabled = current === quizzes.length - 1;
    }
    previous.addEventListener("click", () => {
      show(current - 1);
    });
    next.addEventListener("click", () => {
      show(current + 1);
    });
    deck.showQuiz = (quiz) => {
      const index = quizzes.indexOf(quiz);
      if (index !== -1) show(index);
    };
    const open = quizzes.findIndex((quiz) => !answered(quiz));
    show(open === -1 ? 0 : open);
    return deck;
  }

  function showTarget() {
    const id = decodeURIComponent(location.hash.slice(1));
    const target = id ? document.getElementById(id) : null;
    const quiz = target?.closest ? target.closest(".quiz") : null;
    const deck = quiz ? quiz.closest(".quiz-deck") : null;
    if (deck?.showQuiz) deck.showQuiz(quiz);
  }

  function setUp() {
    const seed = readerSeed();
    const all = Array.prototype.slice.call(document.querySelectorAll("article .quiz"));
    all.forEach((quiz) => {
      if (quiz.querySelector('fieldset input[name="answer"]')) shuffleOptions(quiz, seed);
    });
    // A run of quizzes that follow one another (nothing but whitespace and comments between).
    const runs = [];
    all.forEach((quiz) => {
      if (quiz.closest(".quiz-deck")) return;
      const last = runs[runs.length - 1];
      if (last && last[last.length - 1].nextElementSibling === quiz) last.push(quiz);
      else runs.push([quiz]);
    });
    runs.forEach((run) => {
      if (run.length > 1) makeDeck(run);
    });
    showTarget();
  }

  window.addEventListener("hashchange", showTarget);
  if (typeof document$ !== "undefined") {
    document$.subscribe(() => {
      setTimeout(setUp, 0);
    });
  } else {
    document.addEventListener("DOMContentLoaded", () => {
      setTimeout(setUp, 0);
    });
  }
})();

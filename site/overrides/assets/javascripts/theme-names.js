/* What Material for MkDocs' own templates leave out for assistive technology, added in place.
 *
 * axe-core (tests/site/test_site.py) finds three gaps on every page that come from the theme's
 * templates, not from the course's pages: the search box is a role="dialog" without a name, the
 * loading bar of instant navigation a role="progressbar" without one, and a table too wide for
 * the column scrolls inside a wrapper that the keyboard cannot reach. Overriding the templates
 * would fork them; naming the elements once the page has loaded keeps the theme's own markup.
 */
(() => {
  "use strict";

  const NAMES = [
    ['.md-search[role="dialog"]', "Search the course"],
    ['.md-progress[role="progressbar"]', "Loading the page"],
  ];

  function label() {
    NAMES.forEach(([selector, name]) => {
      document.querySelectorAll(selector).forEach((element) => {
        if (!element.hasAttribute("aria-label")) element.setAttribute("aria-label", name);
      });
    });
    // A wide table scrolls in its wrapper: focusable, the arrow keys scroll it too.
    document.querySelectorAll(".md-typeset__scrollwrap").forEach((wrapper) => {
      if (!wrapper.hasAttribute("tabindex")) {
        wrapper.setAttribute("tabindex", "0");
        wrapper.setAttribute("role", "region");
        wrapper.setAttribute("aria-label", "Table (scrolls sideways)");
      }
    });
  }

  if (typeof document$ !== "undefined") {
    document$.subscribe(label); // instant navigation: every page it shows
  } else {
    document.addEventListener("DOMContentLoaded", label);
  }
})();

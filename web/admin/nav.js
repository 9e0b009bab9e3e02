// nav.js: the bar that leads to the console's sections, kept at the top of
// the window while the page scrolls (sticky, style.css). Each of its
// buttons names a section (data-section); pressed (a click, Enter or
// Space), it brings the section just under the bar and gives the focus to
// the section's heading, so Tab goes on from there. The button of the
// section being read is marked aria-current="location": the one pressed,
// until the page is scrolled (the last sections may never reach the bar);
// else the last section whose top has passed under the bar, or the first.
//
// Buttons, not links: the console is one page behind a sign-in, where a
// link's address (/admin#orders) would lead nowhere of its own.

import { $ } from './dom.js';

let followed = null; // {button, y}: the button last pressed and where the page was scrolled to then

const buttons = () => [...$('sections-nav').querySelectorAll('button[data-section]')];

const shown = (el) => !!el && el.getClientRects().length > 0;

/**
 * sectionOf is the section a button leads to: the first of its
 * data-section ids on screen (the open order, else the placeholder that
 * stands for it).
 */
function sectionOf(button) {
  return button.dataset.section.split(' ').map((id) => $(id)).find(shown) || null;
}

/** current is the button to mark, as the file's comment says. */
function current() {
  if (followed && Math.abs(window.scrollY - followed.y) < 2 && sectionOf(followed.button)) return followed.button;
  followed = null;
  const bar = $('sections-nav').getBoundingClientRect().bottom;
  let mark = null;
  let best = -Infinity;
  for (const b of buttons()) {
    const el = sectionOf(b);
    const top = el ? el.getBoundingClientRect().top : Infinity;
    if (top <= bar + 16 && top > best) {
      best = top;
      mark = b;
    }
  }
  return mark || buttons()[0];
}

/** markSection marks the button of the section being read. */
export function markSection() {
  if (!shown($('sections-nav'))) return;
  // The bar's height, for style.css's scroll-padding-top: whatever is
  // brought into view (a section the bar leads to, a field Tab reaches)
  // stops just below the bar, on one line or wrapped on two.
  document.documentElement.style.setProperty('--bar', `${$('sections-nav').offsetHeight}px`);
  const now = current();
  for (const b of buttons()) {
    if (b === now) b.setAttribute('aria-current', 'location');
    else b.removeAttribute('aria-current');
  }
}

/** follow brings button's section under the bar, focuses its heading and marks button. */
function follow(button) {
  const el = sectionOf(button);
  if (!el) return;
  markSection(); // the bar's height, first
  el.scrollIntoView({ block: 'start' }); // scroll-padding-top keeps it clear of the bar
  followed = { button, y: window.scrollY };
  (el.querySelector('h2[tabindex]') || el).focus({ preventScroll: true });
  markSection();
}

/**
 * showSection brings the section id under the bar as its button would (a
 * tile's link, say), focusing its heading and marking the button.
 */
export function showSection(id) {
  const button = buttons().find((b) => b.dataset.section.split(' ').includes(id));
  if (button) follow(button);
  else $(id).scrollIntoView({ block: 'start' });
}

/** initNav wires the bar: its buttons, and the mark kept as the page scrolls or changes. */
export function initNav() {
  $('sections-nav').addEventListener('click', (e) => {
    const button = e.target.closest('button[data-section]');
    if (button) follow(button);
  });
  let queued = false;
  const soon = () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      markSection();
    });
  };
  window.addEventListener('scroll', soon, { passive: true });
  window.addEventListener('resize', soon);
  new ResizeObserver(soon).observe($('console')); // an order opened or closed, a list loaded
}

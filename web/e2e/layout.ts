// Layout checks the specs share.
import { expect, type Page } from '@playwright/test';

/** Fails when the page is wider than the screen, naming the outermost elements that reach
 *  past its edge (a table or chart pushing it sideways), so the failure says what to fix. */
export async function noSidewaysScroll(page: Page, width: number) {
  const wide = await page.evaluate((w) => {
    if (document.documentElement.scrollWidth <= w) return [];
    return [...document.querySelectorAll('body *')]
      .filter((e) => e.getBoundingClientRect().right > w + 1 && !(e.parentElement && e.parentElement.getBoundingClientRect().right > w + 1))
      .map((e) => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')} (${Math.round(e.getBoundingClientRect().right)}px)`);
  }, width);
  expect(wide, 'elements wider than the screen').toEqual([]);
}

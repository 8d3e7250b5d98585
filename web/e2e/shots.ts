// The README's screenshots: every run takes them (so a page that cannot be shot fails here),
// into target/screenshots; `UPDATE_SCREENSHOTS=1` writes the committed ones in docs/ instead,
// so an ordinary run leaves the tree clean.
import type { Page } from '@playwright/test';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from './harness';

export const SHOTS = path.join(REPO_ROOT, process.env.UPDATE_SCREENSHOTS === '1' ? 'docs/screenshots' : 'target/screenshots');

export async function shot(page: Page, name: string) {
  mkdirSync(SHOTS, { recursive: true });
  await page.waitForTimeout(300); // a pause for the picture only: transitions settle
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: false });
}

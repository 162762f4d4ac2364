/**
 * A real headless browser for the operator page's test: Debian's Chromium, installed by scripts/chromium.sh when the
 * machine has none (a new machine, CI), driven by puppeteer-core through its executablePath — puppeteer's own browser
 * download cannot reach its host here (and is never attempted: puppeteer-core has none).
 */
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import puppeteer, { type Browser } from 'puppeteer-core';

const SCRIPT = resolve(import.meta.dirname, '../../scripts/chromium.sh');

/** The Chromium executable, installed first when missing (apt-get as root; a few minutes on a fresh machine). */
export async function chromiumPath(): Promise<string> {
  const { stdout } = await promisify(execFile)('bash', [SCRIPT], { timeout: 600_000 });
  const path = stdout.trim().split('\n').at(-1) ?? '';
  if (path === '') throw new Error('scripts/chromium.sh printed no path');
  return path;
}

export async function launchChromium(): Promise<Browser> {
  return puppeteer.launch({
    executablePath: await chromiumPath(),
    headless: true,
    // Root (as on CI and here) cannot use Chromium's sandbox; /dev/shm is small in containers.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
    defaultViewport: { width: 1800, height: 900 },
  });
}

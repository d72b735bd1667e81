// My open alerts at the top of the Jobs panel (SPEC MON2-3): a badge with their number, a list of them (what,
// when, a link to the job), a JupyterLab notification when a new one opens, and for an idle workspace's alert
// a "Renew lease" button. Read from GET /alerts with the panel's polling, and every 30 s while it is hidden.

import { Notification } from '@jupyterlab/apputils';
import { button, errorText, h, message, when } from './dom';
import { qs, requestAPI } from './request';
import { IAlert, IPage } from './tokens';

const HIDDEN_POLL_MS = 30_000;
const MIN_GAP_MS = 4_000;

/** The line an alert is listed with: its subject, and when it fired. */
export function alertLine(a: IAlert): string {
  return `${a.subject} (since ${when(a.fired_at)})`;
}

export class AlertsBar {
  readonly node = h('div', { class: 'ti-alerts', id: 'ti-alerts' });
  private seen = new Set<number>();
  private first = true;
  private readAt = 0;
  private reading = false;
  private notes = new Map<number, HTMLElement>(); // an action's outcome per alert, kept across redraws
  private timer = 0;

  /** `me`: the user whose alerts count (admins are answered every alert); `openJob` shows a job's detail. */
  constructor(
    private readonly me: () => string,
    private readonly openJob: (id: number) => void
  ) {}

  start(): void {
    if (!this.timer) {
      this.timer = window.setInterval(() => void this.load(), HIDDEN_POLL_MS);
      void this.load();
    }
  }

  /** From the panel's poll (every 2 s while it is open): at most one read every few seconds. */
  poll(): void {
    if (Date.now() - this.readAt >= MIN_GAP_MS) {
      void this.load();
    }
  }

  async load(): Promise<void> {
    if (this.reading) {
      return;
    }
    this.reading = true;
    this.readAt = Date.now();
    try {
      const page = await requestAPI<IPage<IAlert>>(`alerts${qs({ limit: 100 })}`);
      const me = this.me();
      const mine = page.items.filter(a => a.open && (!me || a.users.includes(me)));
      this.show(mine);
      for (const a of mine) {
        if (!this.seen.has(a.id) && !this.first) {
          Notification.warning(`TiHub alert: ${a.subject}`, { autoClose: false });
        }
        this.seen.add(a.id);
      }
      this.first = false;
    } catch (err) {
      this.node.replaceChildren(message('error', `Could not read your alerts: ${errorText(err)}`));
    } finally {
      this.reading = false;
    }
  }

  private show(alerts: IAlert[]): void {
    if (!alerts.length) {
      this.node.replaceChildren();
      this.node.hidden = true;
      return;
    }
    this.node.hidden = false;
    const badge = h('span', { class: 'ti-alerts-badge', id: 'ti-alerts-badge', 'data-count': String(alerts.length),
      'aria-label': `${alerts.length} open alert${alerts.length > 1 ? 's' : ''}` }, String(alerts.length));
    const items = alerts.map(a => {
      const parts: (HTMLElement | string)[] = [h('span', { class: 'ti-alert-text' }, alertLine(a))];
      if (a.job_id !== null && a.kind === 'job') {
        const id = a.job_id;
        parts.push(' ', h('button', { type: 'button', class: 'ti-link', onclick: () => this.openJob(id) },
          `job ${id}`));
      }
      if (a.rule === 'idle' && a.kind === 'workspace') {
        parts.push(' ', button('Renew lease', () => void this.renew(a), { 'data-alert': String(a.id) }));
      }
      const note = this.notes.get(a.id);
      if (note) {
        parts.push(note);
      }
      return h('li', { class: `ti-alert ti-alert-${a.severity}`, 'data-alert': String(a.id), 'data-key': a.key },
        ...parts);
    });
    const wasOpen = (this.node.querySelector('details') as HTMLDetailsElement | null)?.open ?? true;
    this.node.replaceChildren(
      h('details', { open: wasOpen },
        h('summary', {}, badge, alerts.length > 1 ? ' open alerts' : ' open alert'),
        h('ul', { class: 'ti-alerts-list', id: 'ti-alerts-list' }, items))
    );
  }

  /** An idle workspace's lease: renewed, or the API's refusal shown beside the alert. */
  private async renew(a: IAlert): Promise<void> {
    const owner = String(a.figures.owner ?? '');
    const name = String(a.figures.workspace ?? '');
    try {
      await requestAPI(`workspaces/${encodeURIComponent(owner)}/${encodeURIComponent(name)}/lease`,
        { method: 'POST', json: {} });
      this.notes.set(a.id, message('success', 'Lease renewed.'));
    } catch (err) {
      this.notes.set(a.id, message('error', `Renew lease: ${errorText(err)}`));
    }
    await this.load();
  }
}

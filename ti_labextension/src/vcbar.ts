// The current virtual cluster at the top of the Jobs panel (SPEC RES2): which VC plans, the queue and the
// per-user cap are shown for, and a select to change it where the user may use more than one VC.

import { errorText, h, message } from './dom';
import { qs, requestAPI } from './request';
import { ICurrentVC, IMyQuota, IPage } from './tokens';

export class VCBar {
  readonly node = h('div', { class: 'ti-vc', id: 'ti-vc-bar' });
  private current = '';
  private usable: string[] = [];
  private summary = h('small', { class: 'ti-hint', id: 'ti-vc-summary', 'aria-live': 'polite' });
  private status = h('div', { class: 'ti-form-status', 'aria-live': 'polite' });
  private loaded = false;
  private reading = false;
  private summaryAt = 0;

  /** `onChange` runs after the API accepted a new current VC (the panel reloads what it shows for it). */
  constructor(private readonly onChange: (vc: string) => void) {}

  /** The current VC's name ('' until loaded: the API then picks its own default). */
  get vc(): string {
    return this.current;
  }

  async load(): Promise<void> {
    this.reading = true;
    try {
      this.show(await requestAPI<ICurrentVC>('me/vc'));
      this.loaded = true;
    } catch (err) {
      this.node.replaceChildren(message('error', `Could not read your virtual cluster: ${errorText(err)}`));
    } finally {
      this.reading = false;
    }
  }

  private show(doc: ICurrentVC): void {
    this.current = doc.vc;
    this.usable = doc.usable;
    let control: HTMLElement;
    let label: HTMLElement = h('span', {}, 'Virtual cluster');
    if (this.usable.length > 1) {
      label = h('label', { for: 'ti-vc-select' }, 'Virtual cluster');
      const pick = h('select', { id: 'ti-vc-select', name: 'vc' });
      for (const name of this.usable) {
        pick.append(h('option', { value: name, selected: name === this.current }, name));
      }
      pick.addEventListener('change', () => void this.use(pick.value, pick));
      control = pick;
    } else {
      control = h('strong', { id: 'ti-vc-name' }, this.current);
    }
    this.node.replaceChildren(
      h('div', { class: 'ti-row' }, label, control),
      this.summary,
      this.status
    );
    void this.loadSummary();
  }

  private async use(name: string, pick: HTMLSelectElement): Promise<void> {
    pick.disabled = true;
    this.status.replaceChildren(message('loading', `Switching to ${name}…`));
    try {
      const doc = await requestAPI<ICurrentVC>('me/vc', { method: 'PUT', json: { vc: name } });
      this.status.replaceChildren();
      this.show(doc);
      this.onChange(doc.vc);
    } catch (err) {
      pick.value = this.current;
      pick.disabled = false;
      this.status.replaceChildren(message('error', `Could not switch to ${name}: ${errorText(err)}`));
    }
  }

  /** From the panel's poll: read the VC again if it failed, and the summary line at most every 10 s. */
  poll(): void {
    if (!this.loaded) {
      if (!this.reading) {
        void this.load();
      }
    } else if (Date.now() - this.summaryAt > 10_000) {
      void this.loadSummary();
    }
  }

  /** The per-user cap here and what I hold, and how many jobs wait in this VC's queue. */
  async loadSummary(): Promise<void> {
    const vc = this.current;
    this.summaryAt = Date.now();
    try {
      const [quota, queue] = await Promise.all([
        requestAPI<IMyQuota>('quota'),
        requestAPI<IPage<unknown>>(`queue${qs({ vc, limit: 1 })}`)
      ]);
      if (vc !== this.current) {
        return; // switched meanwhile: the newer load writes the line
      }
      const caps = quota.vc && quota.vc.name === vc ? quota.vc.caps : [];
      const capText = caps.length
        ? `your cap here: ${caps.map(c => `${c.held} of ${c.cap} ${c.device_type}`).join(', ')} held`
        : 'no per-user cap here';
      const waiting = queue.total === 1 ? '1 of your jobs queued' : `${queue.total} of your jobs queued`;
      this.summary.textContent = `${waiting} in ${vc}; ${capText}. New jobs use this VC's plans.`;
    } catch (err) {
      this.summary.textContent = `Queue and cap of ${vc} unavailable: ${errorText(err)}`;
    }
  }
}

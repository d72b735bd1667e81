// Small DOM helpers: the panels are plain elements (real buttons, labels and tables, so the keyboard
// and screen readers work without extra code) and never show a blank area -- loading, empty and error
// states are messages that say what happened.

import { Widget } from '@lumino/widgets';
import { TiError } from './request';

type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;
type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) {
      continue;
    }
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2).toLowerCase(), v as EventListener);
    } else if (v === true) {
      el.setAttribute(k, '');
    } else {
      el.setAttribute(k, String(v));
    }
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) {
      continue;
    }
    el.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return el;
}

export type MessageKind = 'info' | 'loading' | 'empty' | 'error' | 'success';

/** A message line (role=status, or alert for errors, so assistive tech reads it out). */
export function message(kind: MessageKind, text: string): HTMLElement {
  return h(
    'p',
    { class: `ti-message ti-message-${kind}`, role: kind === 'error' ? 'alert' : 'status' },
    text
  );
}

export function errorText(err: unknown): string {
  if (err instanceof TiError) {
    if (err.status === 403) {
      return `Not allowed: ${err.message}`;
    }
    return err.field ? `${err.message} (field: ${err.field})` : err.message;
  }
  return `Something went wrong: ${(err as Error)?.message || String(err)}`;
}

export function button(label: string, onClick: () => void, attrs: Attrs = {}): HTMLButtonElement {
  return h('button', { type: 'button', class: 'ti-button', onclick: () => onClick(), ...attrs }, label);
}

export function table(headers: string[], rows: Child[][], attrs: Attrs = {}): HTMLTableElement {
  return h(
    'table',
    { class: 'ti-table', ...attrs },
    h('thead', {}, h('tr', {}, headers.map(t => h('th', { scope: 'col' }, t)))),
    // each cell carries its column's name: in a narrow sidebar rows are drawn as blocks that show it
    h('tbody', {}, rows.map(r => h('tr', {}, r.map((c, i) => h('td', { 'data-label': headers[i] || null }, c)))))
  );
}

let fieldCounter = 0;

/** A labelled input; returns the wrapper and the control. */
export function field<T extends HTMLElement>(
  label: string,
  control: T,
  hint?: string
): HTMLElement {
  const id = control.id || `ti-field-${++fieldCounter}`;
  control.id = id;
  if (hint) {
    control.setAttribute('aria-describedby', `${id}-hint`);
  }
  return h(
    'div',
    { class: 'ti-field' },
    h('label', { for: id }, label),
    control,
    hint ? h('small', { class: 'ti-hint', id: `${id}-hint` }, hint) : null
  );
}

export function select(
  name: string,
  options: { value: string; label: string }[],
  value = ''
): HTMLSelectElement {
  const s = h('select', { name });
  for (const o of options) {
    s.append(h('option', { value: o.value, selected: o.value === value }, o.label));
  }
  return s;
}

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) {
    return 'unknown';
  }
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

export function when(iso: string | null | undefined): string {
  if (!iso) {
    return '';
  }
  const d = new Date(iso);
  return isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/** A panel that refreshes itself every `periodMs` while it is visible, and not at all when hidden. */
export abstract class PollingPanel extends Widget {
  private _timer = 0;
  private _busy = false;
  private _again = false;

  constructor(private readonly periodMs: number) {
    super();
  }

  /** Fetch and redraw; errors are shown by the subclass. */
  protected abstract refresh(): Promise<void>;

  /** Refresh now; if a refresh is under way, once more right after it (an action's result must show). */
  async tick(): Promise<void> {
    if (this._busy) {
      this._again = true;
      return;
    }
    this._busy = true;
    try {
      do {
        this._again = false;
        await this.refresh();
      } while (this._again);
    } finally {
      this._busy = false;
    }
  }

  /** Run a user's action: say it is under way, then what happened (the API's words on failure); redraw. */
  protected async run(status: HTMLElement, done: string, fn: () => Promise<void>): Promise<void> {
    status.replaceChildren(message('loading', 'Working…'));
    try {
      await fn();
      status.replaceChildren(message('success', done));
    } catch (err) {
      status.replaceChildren(message('error', errorText(err)));
    }
    await this.tick();
  }

  protected onAfterShow(): void {
    void this.tick();
    this._start();
  }

  protected onAfterAttach(): void {
    if (this.isVisible) {
      void this.tick();
      this._start();
    }
  }

  protected onBeforeHide(): void {
    this._stop();
  }

  protected onBeforeDetach(): void {
    this._stop();
  }

  private _start(): void {
    this._stop();
    this._timer = window.setInterval(() => {
      if (this.isVisible && !document.hidden) {
        void this.tick();
      }
    }, this.periodMs);
  }

  private _stop(): void {
    if (this._timer) {
      window.clearInterval(this._timer);
      this._timer = 0;
    }
  }

  dispose(): void {
    this._stop();
    super.dispose();
  }
}

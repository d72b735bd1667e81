// The Storage panel (SPEC STO2-STO4, STO7): my volumes and those shared with me, usage against quota,
// create / expand / share / delete, browse a volume, and which workspace or job holds each mount.

import { button, bytes, errorText, field, h, message, PollingPanel, select, table } from './dom';
import { guideTable, STORAGE_KINDS, suits } from './guide';
import { requestAPI } from './request';
import { IEntry, IPage, IQuota, IVolume } from './tokens';

const KINDS = [
  { value: 'filesystem', label: 'filesystem (shared, read-write by many)' },
  { value: 'block', label: 'block (one writer)' },
  { value: 'local', label: 'local scratch (on the node)' },
  { value: 'dataset', label: 'dataset (read-only once filled)' }
];

/** A dataset's snapshot as words: "copying 45%", "failed: why"; '' once ready. */
export function stateText(v: IVolume): string {
  if (v.state === 'copying') {
    const c = v.copy;
    return c && c.total_bytes ? `copying ${Math.floor((100 * c.done_bytes) / Math.max(1, c.total_bytes))}%` : 'copying';
  }
  return v.state === 'failed' ? `failed: ${v.state_reason || 'see the volume'}` : '';
}

export class StoragePanel extends PollingPanel {
  private quotaArea = h('section', { id: 'ti-storage-quota', 'aria-live': 'polite' });
  private listArea = h('section', { id: 'ti-volumes', 'aria-live': 'polite' });
  private detailArea = h('section', { id: 'ti-volume-detail' });
  private status = h('div', { class: 'ti-form-status', 'aria-live': 'polite' });
  private selected: number | null = null;
  // the detail holds forms (expand, share): redraw it when another volume is chosen or after an action,
  // never on the periodic refresh, or it would wipe what the user is typing
  private shown: number | null = null;
  private stale = false;

  constructor(private readonly me: () => string) {
    super(10000);
    this.id = 'ti-storage-panel';
    this.title.caption = 'TiHub storage';
    this.addClass('ti-panel');
    const name = h('input', { name: 'name', required: true, placeholder: 'my-data', autocomplete: 'off' });
    const kind = select('kind', KINDS, 'filesystem');
    const size = h('input', { name: 'capacity_gib', type: 'number', min: 1, value: 10, required: true });
    const desc = h('input', { name: 'description' });
    // a dataset is a snapshot of a volume I may write: name it (NAME, OWNER/NAME or id); the API's rule
    // (ops/volumes.py create) said before the user meets it as a refusal
    const source = h('input', { name: 'source', placeholder: 'volume to snapshot', autocomplete: 'off' });
    const sourceField = field('Snapshot of', source,
      'the volume whose files the dataset copies: its name, OWNER/NAME or id; yours or shared with you ' +
      'read-write, ready, not local scratch. The copy runs in the background.');
    const kindField = field('Kind', kind, suits(STORAGE_KINDS, kind.value));
    const showSource = (): void => {
      sourceField.style.display = kind.value === 'dataset' ? '' : 'none';
      const hint = kindField.querySelector('.ti-hint');
      if (hint) {
        hint.textContent = suits(STORAGE_KINDS, kind.value);
      }
    };
    kind.addEventListener('change', showSource);
    showSource();
    const form = h(
      'form',
      { class: 'ti-form ti-inline', id: 'ti-volume-form', 'aria-label': 'Create a volume' },
      h('h3', {}, 'New volume'),
      field('Name', name),
      kindField,
      guideTable('ti-storage-guide', STORAGE_KINDS),
      sourceField,
      field('Size (GiB)', size),
      field('Description', desc),
      h('button', { type: 'submit', class: 'ti-button ti-primary' }, 'Create')
    );
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      const copying = kind.value === 'dataset';
      void this.run(this.status, copying ? `Dataset ${name.value} created: its copy runs in the background.` : `Volume ${name.value} created.`, async () => {
        const json: Record<string, unknown> = { name: name.value.trim(), kind: kind.value, capacity_gib: parseInt(size.value, 10), description: desc.value };
        if (copying) {
          json.source = /^[0-9]+$/.test(source.value.trim()) ? parseInt(source.value.trim(), 10) : source.value.trim();
        }
        await requestAPI<IVolume>('volumes', { method: 'POST', json });
        name.value = '';
        source.value = '';
      });
    });
    this.node.append(
      h('div', { class: 'ti-toolbar' }, h('h2', {}, 'Storage'), button('Refresh', () => void this.tick())),
      this.status,
      this.quotaArea,
      this.listArea,
      this.detailArea,
      form
    );
    this.listArea.append(message('loading', 'Loading your volumes…'));
  }

  protected async run(status: HTMLElement, done: string, fn: () => Promise<void>): Promise<void> {
    this.stale = true;
    return super.run(status, done, fn);
  }

  protected async refresh(): Promise<void> {
    try {
      const [vols, quota] = await Promise.all([
        requestAPI<IPage<IVolume>>('volumes?limit=500'),
        requestAPI<IQuota>('quota')
      ]);
      this.drawQuota(quota);
      this.drawList(vols.items);
      if (this.selected !== null && (this.selected !== this.shown || this.stale)) {
        this.shown = this.selected;
        this.stale = false;
        await this.drawDetail(this.selected);
      }
    } catch (err) {
      this.listArea.replaceChildren(message('error', `Could not load volumes: ${errorText(err)}`));
    }
  }

  private drawQuota(q: IQuota): void {
    const rows = q.storage
      .filter(s => s.limit_gib !== null || s.used_gib > 0)
      .map(s => {
        const pct = s.limit_gib ? Math.min(100, Math.round((100 * s.used_gib) / s.limit_gib)) : 0;
        return [
          s.kind,
          h('meter', { min: 0, max: s.limit_gib || 1, value: s.used_gib, 'aria-label': `${s.kind} usage` }),
          `${s.used_gib} of ${s.limit_gib === null ? 'unlimited' : `${s.limit_gib} GiB`}${s.limit_gib ? ` (${pct}%)` : ''}`
        ];
      });
    this.quotaArea.replaceChildren(
      h('h3', {}, 'Quota'),
      rows.length ? table(['Kind', 'Used', ''], rows) : message('empty', 'No storage quota applies to you.')
    );
  }

  private drawList(vols: IVolume[]): void {
    const me = this.me();
    if (!vols.length) {
      this.listArea.replaceChildren(h('h3', {}, 'Volumes'), message('empty', 'No volumes yet. Create one below.'));
      return;
    }
    const rows = vols.map(v => [
      h('button', { type: 'button', class: 'ti-link', 'data-volume': v.name, onclick: () => { this.selected = v.id; void this.tick(); } },
        v.owner === me ? v.name : `${v.owner}/${v.name}`),
      stateText(v) ? `${v.kind} (${stateText(v)})` : v.kind,
      `${v.capacity_gib} GiB`,
      v.owner === me ? (v.shares.length ? `shared with ${v.shares.map(s => `${s.grantee} (${s.mode})`).join(', ')}` : 'mine') : `shared with me (${v.access || 'ro'})`
    ]);
    this.listArea.replaceChildren(h('h3', {}, 'Volumes'), table(['Volume', 'Kind', 'Size', 'Access'], rows, { id: 'ti-volumes-table' }));
  }

  private async drawDetail(id: number): Promise<void> {
    let v: IVolume;
    try {
      v = await requestAPI<IVolume>(`volumes/${id}`);
    } catch (err) {
      this.detailArea.replaceChildren(message('error', `Could not load the volume: ${errorText(err)}`));
      return;
    }
    const mine = v.owner === this.me();
    const size = h('input', { type: 'number', min: v.capacity_gib, value: v.capacity_gib, name: 'capacity_gib' });
    const grantee = h('input', { name: 'grantee', placeholder: 'user or group name' });
    const granteeKind = select('grantee_kind', [{ value: 'user', label: 'user' }, { value: 'group', label: 'group' }]);
    const mode = select('mode', [{ value: 'ro', label: 'read-only' }, { value: 'rw', label: 'read-write' }]);
    const browser = h('div', { class: 'ti-browser', id: 'ti-volume-files' });
    const manage = mine
      ? h(
          'div',
          {},
          h('div', { class: 'ti-row' }, field('New size (GiB)', size),
            button('Expand', () => void this.run(this.status, `${v.name} expanded.`, async () => {
              await requestAPI(`volumes/${v.id}`, { method: 'PATCH', json: { capacity_gib: parseInt(size.value, 10) } });
            }))),
          h('div', { class: 'ti-row', id: 'ti-share-form' }, field('Share with', grantee), granteeKind, mode,
            button('Share', () => void this.run(this.status, `${v.name} shared with ${grantee.value}.`, async () => {
              await requestAPI(`volumes/${v.id}/shares`, { method: 'POST', json: { [granteeKind.value]: grantee.value.trim(), mode: mode.value } });
            }))),
          v.shares.length
            ? table(['Shared with', 'Mode', ''], v.shares.map(s => [`${s.kind} ${s.grantee}`, s.mode,
                button('Stop sharing', () => void this.run(this.status, `No longer shared with ${s.grantee}.`, async () => {
                  await requestAPI(`volumes/${v.id}/shares/${s.id}`, { method: 'DELETE' });
                }))]))
            : null,
          button('Delete volume', () => {
            if (window.confirm(`Delete ${v.name} and everything in it?`)) {
              void this.run(this.status, `${v.name} deleted.`, async () => {
                await requestAPI(`volumes/${v.id}`, { method: 'DELETE' });
                this.selected = this.shown = null;
                this.detailArea.replaceChildren();
              });
            }
          }, { class: 'ti-button ti-danger' })
        )
      : message('info', `Owned by ${v.owner}; you have ${v.access === 'rw' ? 'read-write' : 'read-only'} access.`);
    this.detailArea.replaceChildren(
      h('h3', {}, `${v.owner}/${v.name}`),
      h('p', {}, `${v.kind}, ${v.capacity_gib} GiB, used ${bytes(v.used_bytes)}${v.description ? ` — ${v.description}` : ''}`),
      v.mounted_by && v.mounted_by.length
        ? h('p', { id: 'ti-volume-holders' }, `Mounted by: ${v.mounted_by.join(', ')}`)
        : h('p', { id: 'ti-volume-holders' }, 'Not mounted by any workspace or job.'),
      manage,
      h('h4', {}, 'Contents'),
      browser,
      button('Close', () => { this.selected = this.shown = null; this.detailArea.replaceChildren(); })
    );
    await this.browse(v, '', browser);
  }

  private async browse(v: IVolume, path: string, area: HTMLElement): Promise<void> {
    try {
      const out = await requestAPI<{ path: string; type: string; entries: IEntry[] }>(
        `volumes/${v.id}/files?path=${encodeURIComponent(path)}`
      );
      const up = path ? button('..', () => void this.browse(v, path.split('/').slice(0, -1).join('/'), area)) : null;
      const rows = out.entries.map(e => [
        e.type === 'dir'
          ? button(`${e.name}/`, () => void this.browse(v, path ? `${path}/${e.name}` : e.name, area), { class: 'ti-link' })
          : e.name,
        e.type === 'dir' ? '' : bytes(e.size)
      ]);
      area.replaceChildren(
        h('p', {}, `/${path}`),
        up || '',
        rows.length ? table(['Name', 'Size'], rows) : message('empty', 'This folder is empty.')
      );
    } catch (err) {
      area.replaceChildren(message('error', `Cannot browse: ${errorText(err)}`));
    }
  }
}

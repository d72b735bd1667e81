// The Jobs panel (SPEC DEV1, JOB2-JOB6, Q6): my jobs with live status, why a queued job waits,
// submit, live logs, kill / pause / resume / clone, and a job's detail.

import { AlertsBar } from './alerts';
import { button, errorText, h, message, PollingPanel, table, when } from './dom';
import { JobForm } from './jobform';
import { SSHCopy } from './sshcopy';
import { workspaceTensorBoard } from './wstensorboard';
import { qs, requestAPI } from './request';
import { IJob, ILogChunk, IPage } from './tokens';
import { VCBar } from './vcbar';

const FINISHED = new Set(['killed', 'completed', 'failed', 'error', 'stopped']);
const ACTIVE = new Set(['created', 'queued', 'scheduling', 'running', 'pausing', 'paused', 'killing']);

function devices(j: IJob): string {
  const per = j.devices_per_instance ? `${j.devices_per_instance} × ${j.device_type}` : `${j.cpu_per_instance} CPU`;
  return j.instances > 1 ? `${j.instances} × (${per})` : per;
}

/** Why a job is where it is: queue position and estimate for queued jobs, the reason otherwise. */
export function waitText(j: IJob): string {
  if (j.status === 'queued' && j.queue) {
    const q = j.queue;
    const eta = q.estimated_start ? `, estimated start ${when(q.estimated_start)}` : ', no start estimate yet';
    return `#${q.position} in ${q.queue}${q.pinned ? ' (pinned)' : ''}${eta}${j.reason ? ` — ${j.reason}` : ''}`;
  }
  return j.reason || '';
}

function statusBadge(status: string): HTMLElement {
  return h('span', { class: `ti-status ti-status-${status}`, 'data-status': status }, status);
}

export class JobsPanel extends PollingPanel {
  private view: 'list' | 'form' | 'detail' = 'list';
  private showAll = false;
  private detailId: number | null = null;
  private listArea = h('div', { class: 'ti-list', 'aria-live': 'polite' });
  private main = h('div', { class: 'ti-main' });
  private header: HTMLElement;
  private logOffset = 0;
  private logInstance = 0;
  private logDone = false;
  private form: JobForm | null = null;
  // the current VC (RES2): switching it reloads the form's plans and the VC's queue and cap line
  private vcBar = new VCBar(() => this.vcChanged());
  // kept across the detail's redraws (every 2 s), so what the user types in it survives them
  private tbForm: HTMLFormElement | null = null;
  // WS3: the copy-the-SSH-command box, kept across redraws too (it asks for the command once)
  private ssh = new SSHCopy();
  // my open alerts (MON2-3): a badge and a list above the jobs, whatever the view
  private alerts: AlertsBar;

  /** `me`: the workspace's user, once known ('' before). */
  constructor(me: () => string = () => '') {
    super(2000);
    this.alerts = new AlertsBar(me, id => this.openDetail(id));
    this.id = 'ti-jobs-panel';
    this.title.caption = 'TiHub jobs';
    this.addClass('ti-panel');
    const filter = h('input', { type: 'checkbox', id: 'ti-jobs-all' });
    filter.addEventListener('change', () => {
      this.showAll = filter.checked;
      void this.tick();
    });
    this.header = h(
      'div',
      { class: 'ti-toolbar' },
      h('h2', {}, 'Jobs'),
      button('New job', () => this.openForm(), { id: 'ti-new-job' }),
      button('Refresh', () => void this.tick()),
      h('label', { for: 'ti-jobs-all' }, filter, ' include older finished')
    );
    this.node.append(this.header, this.alerts.node, this.vcBar.node, workspaceTensorBoard() || '', this.main);
    this.alerts.start();
    this.main.append(this.listArea);
    this.listArea.append(message('loading', 'Loading your jobs…'));
  }

  private vcChanged(): void {
    if (this.view === 'form' && this.form) {
      void this.form.loadPlans();
    }
    void this.tick();
  }

  openForm(image?: string, spec?: Record<string, unknown>): void {
    this.view = 'form';
    this.form = new JobForm({
      image,
      vc: () => this.vcBar.vc,
      onSubmitted: job => this.openDetail(job.id),
      onCancel: () => this.openList()
    });
    this.main.replaceChildren(this.form.node);
    const form = this.form;
    void form.load().then(() => {
      if (spec) {
        form.fill(spec);
      }
      (form.node.querySelector('input[name=name]') as HTMLInputElement)?.focus();
    });
  }

  openList(): void {
    this.view = 'list';
    this.detailId = null;
    this.main.replaceChildren(this.listArea);
    void this.tick();
  }

  openDetail(id: number): void {
    this.view = 'detail';
    this.detailId = id;
    this.logOffset = 0;
    this.logInstance = 0;
    this.logDone = false;
    this.tbForm = this.tensorBoardForm(id);
    this.ssh = new SSHCopy();
    this.main.replaceChildren(message('loading', 'Loading the job…'));
    void this.tick();
  }

  protected async refresh(): Promise<void> {
    this.alerts.poll();
    if (this.view === 'list') {
      this.vcBar.poll();
      await this.refreshList();
    } else if (this.view === 'detail' && this.detailId !== null) {
      await this.refreshDetail(this.detailId);
    }
  }

  private async refreshList(): Promise<void> {
    let page: IPage<IJob>;
    try {
      page = await requestAPI<IPage<IJob>>(`jobs${qs({ limit: 100 })}`);
    } catch (err) {
      this.listArea.replaceChildren(message('error', `Could not load your jobs: ${errorText(err)}`));
      return;
    }
    if (this.view !== 'list') {
      return;
    }
    const jobs = page.items.filter(j => j.kind !== 'workspace');
    const items = jobs.filter(j => this.showAll || ACTIVE.has(j.status) || isRecent(j));
    if (!items.length) {
      this.listArea.replaceChildren(
        message('empty', jobs.length ? 'No active jobs and none finished in the last hour. Tick "include older finished" to see the others.' :
          'You have no training jobs yet. Press "New job" to submit one.')
      );
      return;
    }
    const rows = items.map(j => [
      h('button', { type: 'button', class: 'ti-link', onclick: () => this.openDetail(j.id), 'data-job': j.name }, j.name),
      statusBadge(j.status),
      waitText(j),
      devices(j),
      h('span', { class: 'ti-actions' }, this.actions(j, false))
    ]);
    const more = page.total > page.items.length ? message('info', `Showing the newest ${page.items.length} of ${page.total} jobs.`) : null;
    this.listArea.replaceChildren(table(['Job', 'Status', 'Queue / reason', 'Resources', ''], rows, { id: 'ti-jobs-table' }), more || '');
  }

  private actions(j: IJob, detail: boolean): HTMLElement[] {
    const act = (action: string, label: string) =>
      button(label, () => void this.act(j, action), { 'data-action': action, 'aria-label': `${label} ${j.name}` });
    const out: HTMLElement[] = [];
    if (j.status === 'created') {  // a draft (JOB10): started, or deleted to free its name
      out.push(act('start', 'Start'), act('delete', 'Delete'));
    }
    if (j.status === 'queued') {
      out.push(act('cancel', 'Cancel'));
    }
    if (['scheduling', 'running'].includes(j.status)) {
      out.push(act('pause', 'Pause'), act('kill', 'Kill'));
    }
    if (j.status === 'paused') {
      out.push(act('resume', 'Resume'), act('kill', 'Kill'));
    }
    out.push(act('clone', 'Clone'));
    if (detail && FINISHED.has(j.status) && j.kind !== 'workspace') {
      out.push(act('support', 'Ask support'));  // JOB4: a message to the admins with the job's facts
    }
    if (detail) {
      out.push(button('Edit and resubmit', () => this.openForm(undefined, { ...j, name: `${j.name}-2` } as any)));
    }
    return out;
  }

  private async act(j: IJob, action: string): Promise<void> {
    if (action === 'kill' && !window.confirm(`Kill ${j.name}? Its processes are stopped and it cannot be resumed.`)) {
      return;
    }
    if (action === 'delete' && !window.confirm(`Delete the draft ${j.name}?`)) {
      return;
    }
    let question: string | null = null;
    if (action === 'support') {
      question = window.prompt(`Ask the admins about ${j.name}: its state, reason, plan, image and last 50 log lines go with your message.`);
      if (!question || !question.trim()) {
        return;
      }
    }
    try {
      if (action === 'delete') {
        await requestAPI<void>(`jobs/${j.id}`, { method: 'DELETE' });
        this.openList();
        return;
      }
      if (action === 'support') {
        const alert = await requestAPI<{ id: number }>(`jobs/${j.id}/support`, { method: 'POST', json: { message: question } });
        this.main.prepend(message('success', `Support request ${alert.id} sent; the admins' answer shows among your alerts.`));
        return;
      }
      const out = await requestAPI<IJob>(`jobs/${j.id}/${action}`, { method: 'POST', json: {} });
      if (action === 'clone') {
        this.openDetail(out.id);
        return;
      }
      await this.tick();
    } catch (err) {
      const target = this.view === 'list' ? this.listArea : this.main;
      target.prepend(message('error', `${action} ${j.name} failed: ${errorText(err)}`));
    }
  }

  private async refreshDetail(id: number): Promise<void> {
    let job: IJob;
    try {
      job = await requestAPI<IJob>(`jobs/${id}`);
    } catch (err) {
      this.main.replaceChildren(button('Back to jobs', () => this.openList()), message('error', `Could not load job ${id}: ${errorText(err)}`));
      return;
    }
    if (this.view !== 'detail' || this.detailId !== id) {
      return;
    }
    let logs = this.main.querySelector('#ti-job-logs') as HTMLPreElement | null;
    if (!logs || logs.dataset.job !== String(id)) {
      logs = h('pre', { id: 'ti-job-logs', class: 'ti-logs', 'data-job': String(id), tabindex: 0, 'aria-label': 'Logs' });
    }
    const instance = h('select', { id: 'ti-log-instance', 'aria-label': 'Instance' });
    for (let i = 0; i < job.instances; i++) {
      instance.append(h('option', { value: String(i), selected: i === this.logInstance }, `instance ${i}`));
    }
    instance.addEventListener('change', () => {
      this.logInstance = parseInt(instance.value, 10);
      this.logOffset = 0;
      this.logDone = false;
      logs!.textContent = '';
      void this.tick();
    });
    const brief: [string, string][] = [
      ['Status', job.status + (job.exit_code !== null && job.exit_code !== undefined ? ` (exit code ${job.exit_code})` : '')],
      ['Why', waitText(job) || '—'],
      ['Kind', job.kind + (job.strategy ? ` (${job.strategy}, ${job.workers} workers${job.ps ? `, ${job.ps} ps` : ''})` : '')],
      ['Resources', devices(job)],
      ['Pool', job.pool],
      ['Image', job.image],
      ['Command', job.command],
      ['Created', when(job.created_at)],
      ['Started', when(job.started_at) || '—'],
      ['Finished', when(job.finished_at) || '—'],
      ['Run time', runTime(job)]
    ];
    const urls = job.endpoint_urls || {};
    const link = (href: string, text: string) => h('a', { href, target: '_blank', rel: 'noopener' }, text);
    const endpoints = h(
      'div',
      { id: 'ti-job-endpoints' },
      (job.endpoints || []).length || (job.ports || []).length
        ? h('ul', {}, (job.endpoints || []).map(e => h('li', {}, e)),
            (job.ports || []).map(p => h('li', {}, urls[String(p)] ? link(urls[String(p)], `port ${p}`) : `port ${p}`)))
        : message('empty', 'No endpoints or ports were asked for.'),
      (job.tensorboards || []).length
        ? h('ul', {}, (job.tensorboards || []).map(t => h('li', {}, link(t.url, `TensorBoard: ${t.logdir}`))))
        : '',
      this.tensorBoardOffer(job)
    );
    const ahead = job.queue?.jobs_ahead?.length
      ? h('ol', {}, job.queue.jobs_ahead.map(a => h('li', {}, a.owner ? `${a.owner}/${a.name} (#${a.position})` : `another user's job (#${a.position})`)))
      : null;
    const events = (job.events || []).slice(-20).map(e => [when(e.at), statusBadge(e.status), e.message]);
    this.main.replaceChildren(
      h('div', { class: 'ti-toolbar' }, button('Back to jobs', () => this.openList(), { id: 'ti-back' }), this.actions(job, true)),
      h('h3', { id: 'ti-job-title' }, `${job.name} `, statusBadge(job.status)),
      h('dl', { class: 'ti-brief', id: 'ti-job-brief' }, brief.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
      (job.warnings || []).length ? message('info', (job.warnings || []).join(' ')) : '',
      ahead ? h('section', {}, h('h4', {}, 'Jobs ahead of it'), ahead) : '',
      h('section', {}, h('h4', {}, 'SSH'), this.ssh.update(job)),
      h('section', {}, h('h4', {}, 'Endpoints'), endpoints),
      h('section', {}, h('h4', {}, 'History'),
        events.length ? table(['When', 'Status', 'Message'], events, { id: 'ti-job-history' }) : message('empty', 'No events yet.')),
      h('section', {}, h('h4', {}, 'Console'), job.instances > 1 ? instance : null, logs)
    );
    await this.pollLogs(job, logs);
  }

  /** The TensorBoard form where TensorBoard can work: a job that asked for it (the tensorboard endpoint), with a
   *  log directory in one of its volumes that outlives it (not a `local` scratch volume); otherwise a line that
   *  says what it needs. */
  private tensorBoardOffer(job: IJob): HTMLElement | string {
    if (!(job.endpoints || []).includes('tensorboard')) {
      return h('p', { class: 'ti-hint', id: 'ti-tensorboard-hint' },
        'This job did not ask for TensorBoard: Edit and resubmit it with tensorboard ticked under Endpoints to use it.');
    }
    const mounts = (job.volumes || []).filter(v => v.kind !== 'local').map(v => v.mount_path);
    if (!mounts.length || !this.tbForm) {
      return h('p', { class: 'ti-hint', id: 'ti-tensorboard-hint' },
        "TensorBoard reads a log directory in one of the job's volumes; this job has none (submit it with a filesystem volume to use it).");
    }
    const logdir = this.tbForm.querySelector('input[name=logdir]') as HTMLInputElement;
    logdir.placeholder = `${mounts[0].replace(/\/+$/, '')}/tb`;
    return this.tbForm;
  }

  /** TensorBoard for a log directory inside one of the job's volume mounts (JOB6). */
  private tensorBoardForm(id: number): HTMLFormElement {
    const logdir = h('input', { name: 'logdir', placeholder: '/mnt/output/tb', 'aria-label': 'Log directory' });
    const status = h('div', { class: 'ti-form-status', 'aria-live': 'polite' });
    const form = h('form', { class: 'ti-row', id: 'ti-tensorboard-form', 'aria-label': 'Open TensorBoard' },
      logdir, h('button', { type: 'submit', class: 'ti-button' }, 'Open TensorBoard'), status);
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      status.replaceChildren(message('loading', 'Starting TensorBoard…'));
      void requestAPI<{ url: string }>(`jobs/${id}/tensorboard`, { method: 'POST', json: { logdir: logdir.value.trim() } })
        .then(tb => {
          status.replaceChildren(h('p', { class: 'ti-message ti-message-success', role: 'status' },
            'TensorBoard is ready: ', h('a', { href: tb.url, target: '_blank', rel: 'noopener' }, tb.url)));
          window.open(tb.url, '_blank', 'noopener');
        }, err => status.replaceChildren(message('error', `TensorBoard: ${errorText(err)}`)));
    });
    return form;
  }

  private async pollLogs(job: IJob, logs: HTMLPreElement): Promise<void> {
    if (this.logDone) {
      return;
    }
    try {
      const chunk = await requestAPI<ILogChunk>(
        `jobs/${job.id}/logs${qs({ instance: this.logInstance, offset: this.logOffset })}`
      );
      if (chunk.text) {
        const atBottom = logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 4;
        logs.append(document.createTextNode(chunk.text));
        if (atBottom) {
          logs.scrollTop = logs.scrollHeight;
        }
      }
      this.logOffset = chunk.offset;
      this.logDone = chunk.finished && !chunk.text;
      if (!logs.textContent) {
        logs.dataset.empty = job.status === 'queued' ? 'Logs appear when the job starts.' : 'No output yet.';
      } else {
        delete logs.dataset.empty;
      }
    } catch (err) {
      logs.dataset.empty = `Logs unavailable: ${errorText(err)}`;
    }
  }
}

function isRecent(j: IJob): boolean {
  const t = j.finished_at ? Date.parse(j.finished_at) : NaN;
  return !isNaN(t) && Date.now() - t < 3600 * 1000;
}

function runTime(j: IJob): string {
  if (!j.started_at) {
    return '—';
  }
  const end = j.finished_at ? Date.parse(j.finished_at) : Date.now();
  const s = Math.max(0, Math.round((end - Date.parse(j.started_at)) / 1000));
  return s >= 3600 ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min` : s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
}

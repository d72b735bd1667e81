// Types and ids shared by the panels. No side effects: importing this file changes nothing.

export const PLUGIN_ID = 'ti-labextension:plugin';

export namespace CommandIDs {
  export const openJobs = 'ti:open-jobs';
  export const openStorage = 'ti:open-storage';
  export const openImages = 'ti:open-images';
  /** Open the Jobs panel's submit form, optionally with an image already chosen ({image}). */
  export const newJob = 'ti:new-job';
}

export interface IPage<T> {
  items: T[];
  total: number;
  limit: number;
  offset: number;
}

/** GET /images: the page, and what this platform does with the image picked (null where it runs it). */
export interface IImagePage extends IPage<IImage> {
  image_note?: string | null;
}

// The API's name rule (ti_hub/domain/validation.py NAME_PATTERN and NAME_RULE): said and checked as users type;
// the API checks it again on submit
export const NAME_RE = /^[A-Za-z0-9_-]{4,63}$/;
export const NAME_RULE = "4-63 characters of letters, digits, '-' and '_'";

export interface IQueueInfo {
  queue: string;
  position: number;
  ahead: number;
  estimated_start: string | null;
  pinned: boolean;
  provisional?: boolean;
  /** Another user's job is named only to those who may view all jobs; else only its place. */
  jobs_ahead?: { id?: number; name?: string; owner?: string; position: number }[];
}

export interface IJob {
  id: number;
  name: string;
  display_name?: string | null;
  owner: string;
  kind: string;
  strategy: string | null;
  status: string;
  reason: string | null;
  pool: string;
  device_type: string;
  devices_per_instance: number;
  cpu_per_instance: number;
  memory_mib_per_instance: number;
  instances: number;
  workers: number;
  ps: number;
  image: string;
  command: string;
  description: string;
  priority: number;
  exit_code: number | null;
  env: Record<string, string>;
  volumes: { volume: string; mount_path: string; read_only: boolean; kind?: string }[];
  ports: number[];
  endpoints: string[];
  estimated_duration: number | null;
  warnings: string[];
  created_at: string | null;
  queued_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  queue?: IQueueInfo;
  /** Names of the secret environment entries (their values are never shown). */
  secret_env_names?: string[];
  /** Another user's waiting job: only name, owner, state, resources and queue place (no image, command, env…). */
  summary?: boolean;
  /** The owner's only: declared port -> its path through the hub (instance 0, while running). */
  endpoint_urls?: Record<string, string>;
  tensorboards?: { logdir: string; url: string }[];
  events?: { at: string; status: string; message: string }[];
}

export interface ILogChunk {
  text: string;
  offset: number;
  instance: number;
  instances: number;
  status: string;
  finished: boolean;
}

export interface IPlan {
  name: string;
  kinds: string[];
  device_type: string;
  device_count: number;
  cpu: number;
  memory_mib: number;
  pool: string;
  description?: string;
}

export interface IShare {
  id: number;
  kind: 'user' | 'group';
  grantee: string;
  mode: 'ro' | 'rw';
}

export interface IVolume {
  id: number;
  owner: string;
  name: string;
  kind: string;
  capacity_gib: number;
  description: string;
  public: boolean;
  shares: IShare[];
  access?: 'ro' | 'rw' | null;
  used_bytes?: number | null;
  mounted_by?: string[];
  state?: 'ready' | 'copying' | 'failed';
  state_reason?: string;
  copy?: { total_bytes: number | null; done_bytes: number };
}

export interface IQuota {
  user: string;
  compute: {
    kind: string;
    device_type: string;
    limit: { devices: number; cpu: number; memory_mib: number } | null;
    used: { devices: number; cpu: number; memory_mib: number };
  }[];
  storage: { kind: string; limit_gib: number | null; used_gib: number }[];
}

export interface IImage {
  id: number;
  name: string;
  address: string;
  version?: string;
  accelerator?: string;
  description?: string;
  // IMG3: read from the image's registry; `registry` is 'ok', 'pending: ...' or why they are missing
  size_bytes?: number | null;
  image_created?: string | null;
  digest?: string | null;
  registry?: string;
}

export interface ICredential {
  id: number;
  name: string;
  registry: string;
  username: string;
}

export interface ITemplate {
  id: number;
  name: string;
  scope: string;
  group?: string | null;
  owner?: string;
  spec: Record<string, unknown>;
}

export interface IEntry {
  name: string;
  type: 'dir' | 'file';
  size?: number;
}

/** GET/PUT /me/vc: my current virtual cluster and those I may use. */
export interface ICurrentVC {
  vc: string;
  usable: string[];
}

/** GET /quota: only what the panel reads (the current VC's per-user caps and what I hold). */
export interface IMyQuota {
  vc: { name: string; caps: { device_type: string; cap: number; held: number }[] };
}

/** GET /alerts: a condition about my work (a job past its duration, an idle workspace), open until it clears. */
export interface IAlert {
  id: number;
  key: string;
  kind: 'machine' | 'job' | 'workspace' | 'queue' | 'support';
  rule: string;
  severity: 'info' | 'warning' | 'critical';
  subject: string;
  message: string;
  job_id: number | null;
  machine: string;
  users: string[];
  figures: Record<string, unknown>;
  fired_at: string;
  last_notified_at: string | null;
  notices: number;
  cleared_at: string | null;
  open: boolean;
  /** a support request's answer (JOB4); empty until an admin answers */
  answer: string;
  answered_by: string;
  answered_at: string | null;
}

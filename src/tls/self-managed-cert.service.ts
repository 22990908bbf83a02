import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import {
  AdmissionregistrationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  KubeConfig,
  type V1MutatingWebhookConfiguration,
  type V1Secret,
} from '@kubernetes/client-node';
import { BackgroundTasks } from '../common/background-tasks.js';
import { KUBE_ENV, inCluster, platformNamespace } from '../kube/kube.env.js';
import { LeaderLease, leaseIdentity } from '../kube/leader-lease.js';
import { ResilientInformer } from '../kube/resilient-informer.js';
import { issueCa, issueServing } from './cert-authority.js';
import {
  BUNDLE_SINCE_ANNOTATION,
  CERT_LEASE,
  CERT_SECRET,
  type CertSecretState,
  type CertStep,
  type SelfManagedSettings,
  WEBHOOK_CONFIGURATION,
  certSecretData,
  planCertificates,
  readCertSecret,
  readSelfManagedSettings,
  readWebhookBundle,
} from './self-managed-cert.rules.js';
import { TlsReloader } from './tls-reloader.service.js';

/** How often the leader looks at both objects when nothing is due (someone may have replaced the webhook configuration). */
const RECHECK_MS = 10_000;
/** Steps in a row before waiting: a plan that never settles must not spin. */
const MAX_STEPS = 8;

/**
 * OVERCOMMIT_CERT_MODE=self-managed. Every replica watches the Secret through the API (not a
 * volume: the kubelet refreshes a Secret volume only at its sync period, a minute or more, and
 * a volume of a Secret that does not exist yet would keep the pod from starting) and serves
 * its `tls.crt`. The replica holding the Lease applies planCertificates() to the Secret and
 * the webhook configuration, one step at a time.
 */
@Injectable()
export class SelfManagedCertificates implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('Certificates');
  private readonly settings: SelfManagedSettings;
  private readonly core: CoreV1Api;
  private readonly admission: AdmissionregistrationV1Api;
  private readonly informer: ResilientInformer<V1Secret>;
  private readonly lease: LeaderLease;
  private served = '';
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  private stopped = false;
  /** reconcileSoon(), guarded: what timers, Secret events and the Lease call. */
  private readonly wake: () => void;

  constructor(
    kube: KubeConfig,
    @Inject(KUBE_ENV) env: NodeJS.ProcessEnv,
    private readonly tls: TlsReloader,
    background: BackgroundTasks,
  ) {
    if (!inCluster(env)) throw new Error('OVERCOMMIT_CERT_MODE=self-managed needs the API server: run in a cluster, or set OVERCOMMIT_KUBECONFIG');
    this.settings = readSelfManagedSettings(env, platformNamespace(env));
    const namespace = this.settings.namespace;
    this.core = kube.makeApiClient(CoreV1Api);
    this.admission = kube.makeApiClient(AdmissionregistrationV1Api);
    const fieldSelector = `metadata.name=${CERT_SECRET}`;
    this.informer = new ResilientInformer(kube, `/api/v1/namespaces/${namespace}/secrets`, () => this.core.listNamespacedSecret({ namespace, fieldSelector }), {
      description: `Secret ${this.describeSecret()}`,
      fieldSelector,
    });
    const onSecret = background.guard('tls-reload', (secret: V1Secret) => this.onSecret(secret));
    this.informer.cache.on('add', onSecret);
    this.informer.cache.on('update', onSecret);
    this.wake = background.guard('tls-reload', () => this.reconcileSoon());
    this.lease = new LeaderLease(kube.makeApiClient(CoordinationV1Api), { namespace, name: CERT_LEASE }, leaseIdentity(env), (leader) => {
      if (leader) this.wake();
    });
  }

  async onModuleInit(): Promise<void> {
    this.logger.log(
      `self-managed certificates in Secret ${this.describeSecret()} for ${[...this.settings.dnsNames, ...this.settings.ipAddresses].join(', ')}; ` +
        `caBundle of MutatingWebhookConfiguration ${WEBHOOK_CONFIGURATION}; leader by Lease ${this.settings.namespace}/${CERT_LEASE}`,
    );
    await this.informer.start();
    this.lease.start();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    await Promise.all([this.lease.stop(), this.informer.stop()]);
  }

  /** Every replica: serve the Secret's certificate when it changes. The leader also re-plans. */
  private onSecret(secret: V1Secret): void {
    const { serving, problems } = readCertSecret(secret.data);
    if (serving && serving.pem + serving.key !== this.served && this.tls.install(serving.pem, serving.key, `Secret ${this.describeSecret()}`)) {
      this.served = serving.pem + serving.key;
    }
    if (problems.length && this.lease.isLeader()) this.logger.warn(`Secret ${this.describeSecret()}: ${problems.join('; ')}`);
    if (this.lease.isLeader()) this.wake();
  }

  /** Runs a reconcile now (or right after the one running). */
  private reconcileSoon(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = this.reconcile()
      .catch((error) => {
        const code = (error as { code?: number }).code;
        const hint =
          code === 404
            ? ` (kubectl apply -k k8s/ creates Secret ${this.describeSecret()} and MutatingWebhookConfiguration ${WEBHOOK_CONFIGURATION}; the webhook may only get and update them)`
            : '';
        this.logger.error(`certificate reconcile failed: ${(error as Error).message}${hint}; retrying in ${RECHECK_MS} ms`);
        return new Date(Date.now() + RECHECK_MS);
      })
      .then((until) => {
        this.running = undefined;
        if (this.stopped || !this.lease.isLeader()) return;
        if (this.again) {
          this.again = false;
          this.wake();
          return;
        }
        const delay = Math.min(Math.max(until.getTime() - Date.now(), 0), RECHECK_MS);
        this.timer = setTimeout(() => this.wake(), delay);
      });
  }

  /** Applies steps until the plan is to wait; returns until when. */
  private async reconcile(): Promise<Date> {
    for (let i = 0; i < MAX_STEPS && this.lease.isLeader() && !this.stopped; i++) {
      const [secret, configuration] = await Promise.all([
        this.core.readNamespacedSecret({ namespace: this.settings.namespace, name: CERT_SECRET }),
        this.admission.readMutatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION }),
      ]);
      const state = readCertSecret(secret.data);
      const step = planCertificates(state, readWebhookBundle(configuration), this.settings, new Date());
      if (step.kind === 'wait') {
        this.logger.debug(`waiting until ${step.until.toISOString()} for ${step.reason}`);
        return step.until;
      }
      await this.apply(step, state, secret, configuration);
    }
    return new Date(Date.now() + RECHECK_MS);
  }

  private async apply(
    step: Exclude<CertStep, { kind: 'wait' }>,
    state: CertSecretState,
    secret: V1Secret,
    configuration: V1MutatingWebhookConfiguration,
  ): Promise<void> {
    const now = new Date();
    switch (step.kind) {
      case 'new-ca': {
        const ca = await issueCa(now, this.settings.validityMs);
        await this.writeSecret(secret, { ...state, cas: [ca.ca, ...step.keep.filter((c) => c.pem !== ca.ca.pem)], caKey: ca.key });
        this.logger.log(`new CA ${ca.ca.x509.subject.replace('CN=', '')} (expires ${ca.ca.notAfter.toISOString()}): ${step.reason}`);
        return;
      }
      case 'write-bundle': {
        const caBundle = Buffer.from(step.bundle).toString('base64');
        const annotations = { ...configuration.metadata?.annotations, [BUNDLE_SINCE_ANNOTATION]: now.toISOString() };
        const body: V1MutatingWebhookConfiguration = {
          ...configuration,
          metadata: { ...configuration.metadata, annotations },
          webhooks: (configuration.webhooks ?? []).map((w) => ({ ...w, clientConfig: { ...w.clientConfig, caBundle } })),
        };
        await this.admission.replaceMutatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION, body });
        this.logger.log(`caBundle of MutatingWebhookConfiguration ${WEBHOOK_CONFIGURATION} set to ${state.cas.length} CA(s), every entry`);
        return;
      }
      case 'issue-serving': {
        const serving = await issueServing({ ca: state.cas[0]!, key: state.caKey! }, this.settings, now);
        await this.writeSecret(secret, { ...state, serving: { pem: serving.serving.pem, key: serving.key } });
        this.logger.log(`new serving certificate (expires ${serving.serving.notAfter.toISOString()}): ${step.reason}`);
        return;
      }
      case 'drop-old-cas': {
        await this.writeSecret(secret, { ...state, cas: step.keep });
        this.logger.log(`ca.crt down to ${step.keep.length} CA(s): ${step.reason}`);
        return;
      }
    }
  }

  /** A PUT with the resourceVersion read: a concurrent writer makes it fail, and the next pass re-plans. */
  private async writeSecret(secret: V1Secret, state: Parameters<typeof certSecretData>[0]): Promise<void> {
    const body: V1Secret = { ...secret, data: certSecretData(state) };
    await this.core.replaceNamespacedSecret({ namespace: this.settings.namespace, name: CERT_SECRET, body });
  }

  private describeSecret(): string {
    return `${this.settings.namespace}/${CERT_SECRET}`;
  }
}

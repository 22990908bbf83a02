/**
 * The AdmissionReviews the admission benchmark sends, at the sizes issue 4 names. Node reviews
 * come from the shared fixtures (test/fixtures/nodes.ts), so the bench sends what the app tests
 * and the e2e scenarios send. Every body is built once, with a fixed uid, so two runs send the
 * same bytes.
 */
import { kubeadmNode, kwokNode, nodeReview } from '../test/fixtures/nodes.js';
import { podReview, richDeploymentPod } from '../test/fixtures/pods.js';

type Json = Record<string, any>;

export interface BenchReview {
  /** Key in the results JSON. */
  name: 'bare-node' | 'kubeadm-node' | 'large-node' | 'pod';
  description: string;
  /** A node review: ours must answer with a patch (the config gives cpu a ratio of 1.5). */
  expectPatch: boolean;
  body: Buffer;
}

const uid = (n: number) => `b3ac0000-0000-4000-8000-${n.toString().padStart(12, '0')}`;

/** The `pod` review: richDeploymentPod's CREATE. */
export function deploymentPodReview(): Json {
  return podReview(richDeploymentPod(), { uid: uid(4) });
}

const encode = (review: Json) => Buffer.from(JSON.stringify(review));

/** The four reviews, smallest first. */
export function benchReviews(): BenchReview[] {
  return [
    {
      name: 'bare-node',
      description: 'kwok node, nodes/status UPDATE (object + oldObject)',
      expectPatch: true,
      body: encode(nodeReview(kwokNode(), { uid: uid(1) })),
    },
    {
      name: 'kubeadm-node',
      description: 'kubeadm node, 50 images, full conditions, nodes/status UPDATE',
      expectPatch: true,
      body: encode(nodeReview(kubeadmNode({ images: 50 }), { uid: uid(2) })),
    },
    {
      // nodeStatusMaxImages raised to 100, long registry paths.
      name: 'large-node',
      description: 'kubeadm node, 100 images with 180-char names, nodes/status UPDATE',
      expectPatch: true,
      body: encode(nodeReview(kubeadmNode({ images: 100, imageNameLength: 180 }), { uid: uid(3) })),
    },
    {
      name: 'pod',
      description: 'Deployment pod CREATE, 2 containers, env, probes, 5 volumes',
      expectPatch: false,
      body: encode(deploymentPodReview()),
    },
  ];
}

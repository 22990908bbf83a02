export const DURATION = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/;

/**
 * A duration in the Go/kubelet spelling restricted to whole hours, minutes and seconds
 * ("5m", "90s", "1m30s"), in milliseconds; NaN when it is not one. Written here because the
 * spelling is the kubelet's (nodeStatusReportFrequency) and no dependency of ours parses it.
 */
export function parseDuration(text: string): number {
  const match = DURATION.exec(text);
  if (match === null || text === '') return Number.NaN;
  const [, hours = '0', minutes = '0', seconds = '0'] = match;
  return ((Number(hours) * 60 + Number(minutes)) * 60 + Number(seconds)) * 1000;
}

/** The parts of a Node every feature reads. Quantities as the API sends them (strings). */
export interface NodeLike {
  metadata?: {
    name?: string;
    uid?: string;
    labels?: Readonly<Record<string, string>>;
    annotations?: Readonly<Record<string, string>>;
  };
  status?: {
    allocatable?: Readonly<Record<string, string | number>>;
    capacity?: Readonly<Record<string, string | number>>;
  };
}

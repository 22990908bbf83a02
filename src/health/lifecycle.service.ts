import { Injectable } from '@nestjs/common';

/** Set once SIGTERM arrives: readiness fails so endpoints drop us before the server closes. */
@Injectable()
export class LifecycleService {
  private draining = false;

  startDraining(): void {
    this.draining = true;
  }

  isDraining(): boolean {
    return this.draining;
  }
}

import { BadRequestException, Body, Controller, HttpCode, Post } from '@nestjs/common';
import { InvalidAdmissionReview } from './admission-review.decoder.js';
import { AdmissionPipeline } from './admission.pipeline.js';
import type { AdmissionReviewResponse } from './admission.types.js';

@Controller()
export class AdmissionController {
  constructor(private readonly pipeline: AdmissionPipeline) {}

  /** The API server's webhook call. Served on the HTTPS port only (see main.ts). */
  @Post('mutate')
  @HttpCode(200)
  mutate(@Body() body: unknown): AdmissionReviewResponse {
    try {
      return this.pipeline.review(body);
    } catch (error) {
      if (error instanceof InvalidAdmissionReview) {
        throw new BadRequestException({ statusCode: 400, error: 'Bad Request', message: error.message, problems: error.problems });
      }
      throw error;
    }
  }
}

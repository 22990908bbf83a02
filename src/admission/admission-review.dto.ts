import { Type } from 'class-transformer';
import { Equals, IsBoolean, IsDefined, IsIn, IsNotEmpty, IsObject, IsOptional, IsString, ValidateNested } from 'class-validator';
import { OPERATIONS, type Operation } from './admission.types.js';

class GroupVersionKindDto {
  @IsString() group: string;
  @IsString() version: string;
  @IsString() @IsNotEmpty() kind: string;
}

class GroupVersionResourceDto {
  @IsString() group: string;
  @IsString() version: string;
  @IsString() @IsNotEmpty() resource: string;
}

/** The request envelope. `object`/`oldObject` are checked for shape only, never copied. */
export class AdmissionRequestDto {
  @IsString() @IsNotEmpty() uid: string;
  @IsDefined() @IsObject() @ValidateNested() @Type(() => GroupVersionKindDto) kind: GroupVersionKindDto;
  @IsDefined() @IsObject() @ValidateNested() @Type(() => GroupVersionResourceDto) resource: GroupVersionResourceDto;
  @IsOptional() @IsString() subResource?: string;
  @IsOptional() @IsString() name?: string;
  @IsOptional() @IsString() namespace?: string;
  @IsIn(OPERATIONS) operation: Operation;
  @IsOptional() @IsBoolean() dryRun?: boolean;
}

export class AdmissionReviewDto {
  @Equals('admission.k8s.io/v1') apiVersion: string;
  @Equals('AdmissionReview') kind: string;
  @IsDefined() @IsObject() @ValidateNested() @Type(() => AdmissionRequestDto) request: AdmissionRequestDto;
}

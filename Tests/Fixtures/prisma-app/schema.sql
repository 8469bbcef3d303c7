-- A fixture app schema, as `prisma migrate` writes it for the seeds' models on Supabase, with nobody tuning it for
-- the functions: quoted PascalCase tables, camelCase columns, text ids (`@default(cuid())` is made by Prisma's
-- client, so the columns have no default), `DateTime` as `timestamp(3)` holding UTC, `@updatedAt` with no default,
-- an enum for the recorder's role, Supabase users as uuid, and the app's own row level security on every table.
-- docs/deploy.md#bring-your-own-tables maps it (app-mapping.sql beside this file); AppTablesTests migrates onto it.
CREATE TYPE "RecorderRole" AS ENUM ('PATIENT', 'CAREGIVER');

CREATE TABLE "Patient" (
    "id" TEXT NOT NULL,
    "displayName" TEXT NOT NULL,
    "birthYear" INTEGER,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    CONSTRAINT "Patient_pkey" PRIMARY KEY ("id")
);

CREATE TABLE "CaregiverPatientLink" (
    "id" TEXT NOT NULL,
    "caregiverId" UUID NOT NULL,
    "patientId" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "revokedAt" TIMESTAMP(3),
    CONSTRAINT "CaregiverPatientLink_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "CaregiverPatientLink_caregiverId_patientId_key" ON "CaregiverPatientLink"("caregiverId", "patientId");
CREATE INDEX "CaregiverPatientLink_patientId_idx" ON "CaregiverPatientLink"("patientId");

CREATE TABLE "PatientSession" (
    "id" TEXT NOT NULL,
    "patientId" TEXT NOT NULL,
    "tokenHash" BYTEA NOT NULL,
    "deviceName" TEXT,
    "expiresAt" TIMESTAMP(3) NOT NULL,
    "revokedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "PatientSession_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "PatientSession_tokenHash_key" ON "PatientSession"("tokenHash");

CREATE TABLE "Medication" (
    "id" TEXT NOT NULL,
    "patientId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "dosage" TEXT,
    "isPrn" BOOLEAN NOT NULL DEFAULT false,
    "startDate" TIMESTAMP(3) NOT NULL,
    "endDate" TIMESTAMP(3),
    "archivedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    CONSTRAINT "Medication_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "Medication_patientId_idx" ON "Medication"("patientId");

CREATE TABLE "MedicationSchedule" (
    "id" TEXT NOT NULL,
    "medicationId" TEXT NOT NULL,
    "time" TEXT NOT NULL,
    CONSTRAINT "MedicationSchedule_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "MedicationSchedule_medicationId_idx" ON "MedicationSchedule"("medicationId");

CREATE TABLE "DoseRecord" (
    "id" TEXT NOT NULL,
    "patientId" TEXT NOT NULL,
    "medicationId" TEXT NOT NULL,
    "scheduledAt" TIMESTAMP(3) NOT NULL,
    "takenAt" TIMESTAMP(3) NOT NULL,
    "recordedByRole" "RecorderRole" NOT NULL,
    "recordedById" TEXT NOT NULL,
    "recordingGroupId" TEXT,
    "note" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    CONSTRAINT "DoseRecord_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "DoseRecord_patientId_medicationId_scheduledAt_key" ON "DoseRecord"("patientId", "medicationId", "scheduledAt");
CREATE INDEX "DoseRecord_recordingGroupId_idx" ON "DoseRecord"("recordingGroupId");

CREATE TABLE "PrnDoseRecord" (
    "id" TEXT NOT NULL,
    "patientId" TEXT NOT NULL,
    "medicationId" TEXT NOT NULL,
    "takenAt" TIMESTAMP(3) NOT NULL,
    "quantity" INTEGER NOT NULL DEFAULT 1,
    "idempotencyKey" TEXT,
    "requestFingerprint" TEXT,
    "recordedByRole" "RecorderRole" NOT NULL,
    "recordedById" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    CONSTRAINT "PrnDoseRecord_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "PrnDoseRecord_patientId_idempotencyKey_key" ON "PrnDoseRecord"("patientId", "idempotencyKey");
CREATE INDEX "PrnDoseRecord_patientId_takenAt_idx" ON "PrnDoseRecord"("patientId", "takenAt");

ALTER TABLE "CaregiverPatientLink" ADD CONSTRAINT "CaregiverPatientLink_patientId_fkey" FOREIGN KEY ("patientId") REFERENCES "Patient"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "PatientSession" ADD CONSTRAINT "PatientSession_patientId_fkey" FOREIGN KEY ("patientId") REFERENCES "Patient"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "Medication" ADD CONSTRAINT "Medication_patientId_fkey" FOREIGN KEY ("patientId") REFERENCES "Patient"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "MedicationSchedule" ADD CONSTRAINT "MedicationSchedule_medicationId_fkey" FOREIGN KEY ("medicationId") REFERENCES "Medication"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "DoseRecord" ADD CONSTRAINT "DoseRecord_patientId_fkey" FOREIGN KEY ("patientId") REFERENCES "Patient"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "DoseRecord" ADD CONSTRAINT "DoseRecord_medicationId_fkey" FOREIGN KEY ("medicationId") REFERENCES "Medication"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "PrnDoseRecord" ADD CONSTRAINT "PrnDoseRecord_patientId_fkey" FOREIGN KEY ("patientId") REFERENCES "Patient"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "PrnDoseRecord" ADD CONSTRAINT "PrnDoseRecord_medicationId_fkey" FOREIGN KEY ("medicationId") REFERENCES "Medication"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- The app's own row level security, as a Supabase app writes it: a signed-in caregiver reads their linked patients'
-- rows; nothing for anon.
ALTER TABLE "Patient" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "CaregiverPatientLink" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "PatientSession" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "Medication" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "MedicationSchedule" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "DoseRecord" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "PrnDoseRecord" ENABLE ROW LEVEL SECURITY;
CREATE POLICY "caregiver reads own links" ON "CaregiverPatientLink" FOR SELECT TO authenticated
    USING ("caregiverId" = nullif(current_setting('request.jwt.claim.sub', true), '')::uuid);
CREATE POLICY "caregiver reads linked patients" ON "Patient" FOR SELECT TO authenticated
    USING ("id" IN (SELECT "patientId" FROM "CaregiverPatientLink"
                    WHERE "caregiverId" = nullif(current_setting('request.jwt.claim.sub', true), '')::uuid
                      AND "revokedAt" IS NULL));
CREATE POLICY "caregiver reads linked doses" ON "DoseRecord" FOR SELECT TO authenticated
    USING ("patientId" IN (SELECT "patientId" FROM "CaregiverPatientLink"
                           WHERE "caregiverId" = nullif(current_setting('request.jwt.claim.sub', true), '')::uuid
                             AND "revokedAt" IS NULL));

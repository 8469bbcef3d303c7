import CaregiverPush

// The service's process (CaregiverService): one API Gateway 2.0 event on stdin, the response on stdout (or the Runtime API).
CaregiverService.run(PrnRecord())

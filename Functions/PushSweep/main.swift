import CaregiverPush

// Reads one EventBridge Scheduled Event (or {}) on stdin and writes the run's summary on stdout (see FunctionHost).
CaregiverService.run(PushSweep())

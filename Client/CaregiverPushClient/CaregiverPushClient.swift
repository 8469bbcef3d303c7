// The slot enum and the push's `data` keys are the server's own definitions (`PushPayloadContract`); re-exported so
// that `import CaregiverPushClient` is all the app writes to name `Slot`.
@_exported import PushPayloadContract

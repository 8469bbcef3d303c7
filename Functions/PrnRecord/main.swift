import CaregiverPush

// Reads one API Gateway 2.0 event on stdin and writes the response on stdout (see FunctionHost).
CaregiverFunction.main(PrnRecord())

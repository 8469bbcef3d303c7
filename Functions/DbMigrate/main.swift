import CaregiverPush
import FoundationEssentials
import FunctionRuntime

// A CloudFormation custom resource: reads CloudFormation's request (on stdin, or from the Runtime API on Lambda),
// applies the migrations on Create and Update, and PUTs the outcome to the request's ResponseURL.
let environment = ProcessInfo.processInfo.environment
let service = CaregiverService(function: .dbMigrate, environment: environment)
let customResource = MigrationsCustomResource(
    service: service, migrationsDirectory: MigrationsCustomResource.migrationsDirectory(environment: environment),
    region: environment["AWS_REGION"])
FunctionHost.run(customResource, environment: environment)

#include "launcher/libvirt/hypervisor.h"

#include <libvirt/libvirt.h>

#include "absl/strings/str_cat.h"

namespace kvnode {

std::string DomainStateName(int state) {
  switch (state) {
    case VIR_DOMAIN_NOSTATE: return "NoState";
    case VIR_DOMAIN_RUNNING: return "Running";
    case VIR_DOMAIN_BLOCKED: return "Blocked";
    case VIR_DOMAIN_PAUSED: return "Paused";
    case VIR_DOMAIN_SHUTDOWN: return "Shutdown";
    case VIR_DOMAIN_SHUTOFF: return "Shutoff";
    case VIR_DOMAIN_CRASHED: return "Crashed";
    case VIR_DOMAIN_PMSUSPENDED: return "PMSuspended";
    default: return absl::StrCat("State", state);
  }
}

std::string DomainStateReasonName(int state, int reason) {
  switch (state) {
    case VIR_DOMAIN_RUNNING:
      switch (reason) {
        case VIR_DOMAIN_RUNNING_BOOTED: return "Booted";
        case VIR_DOMAIN_RUNNING_MIGRATED: return "Migrated";
        case VIR_DOMAIN_RUNNING_RESTORED: return "Restored";
        case VIR_DOMAIN_RUNNING_UNPAUSED: return "Unpaused";
        case VIR_DOMAIN_RUNNING_MIGRATION_CANCELED: return "MigrationCanceled";
        case VIR_DOMAIN_RUNNING_WAKEUP: return "Wakeup";
        case VIR_DOMAIN_RUNNING_CRASHED: return "Crashed";
        case VIR_DOMAIN_RUNNING_POSTCOPY: return "Postcopy";
        default: return "Unknown";
      }
    case VIR_DOMAIN_PAUSED:
      switch (reason) {
        case VIR_DOMAIN_PAUSED_USER: return "User";
        case VIR_DOMAIN_PAUSED_MIGRATION: return "Migration";
        case VIR_DOMAIN_PAUSED_SAVE: return "Save";
        case VIR_DOMAIN_PAUSED_DUMP: return "Dump";
        case VIR_DOMAIN_PAUSED_IOERROR: return "IOError";
        case VIR_DOMAIN_PAUSED_WATCHDOG: return "Watchdog";
        case VIR_DOMAIN_PAUSED_SHUTTING_DOWN: return "ShuttingDown";
        case VIR_DOMAIN_PAUSED_CRASHED: return "Crashed";
        case VIR_DOMAIN_PAUSED_STARTING_UP: return "StartingUp";
        case VIR_DOMAIN_PAUSED_POSTCOPY: return "Postcopy";
        case VIR_DOMAIN_PAUSED_POSTCOPY_FAILED: return "PostcopyFailed";
        default: return "Unknown";
      }
    case VIR_DOMAIN_SHUTOFF:
      switch (reason) {
        case VIR_DOMAIN_SHUTOFF_SHUTDOWN: return "Shutdown";
        case VIR_DOMAIN_SHUTOFF_DESTROYED: return "Destroyed";
        case VIR_DOMAIN_SHUTOFF_CRASHED: return "Crashed";
        case VIR_DOMAIN_SHUTOFF_MIGRATED: return "Migrated";
        case VIR_DOMAIN_SHUTOFF_SAVED: return "Saved";
        case VIR_DOMAIN_SHUTOFF_FAILED: return "Failed";
        case VIR_DOMAIN_SHUTOFF_FROM_SNAPSHOT: return "FromSnapshot";
        case VIR_DOMAIN_SHUTOFF_DAEMON: return "Daemon";
        default: return "Unknown";
      }
    case VIR_DOMAIN_CRASHED:
      return reason == VIR_DOMAIN_CRASHED_PANICKED ? "Panicked" : "Unknown";
    case VIR_DOMAIN_SHUTDOWN:
      return "User";
    default:
      return "Unknown";
  }
}

std::string LifecycleEventName(int event) {
  switch (event) {
    case VIR_DOMAIN_EVENT_DEFINED: return "Defined";
    case VIR_DOMAIN_EVENT_UNDEFINED: return "Undefined";
    case VIR_DOMAIN_EVENT_STARTED: return "Started";
    case VIR_DOMAIN_EVENT_SUSPENDED: return "Suspended";
    case VIR_DOMAIN_EVENT_RESUMED: return "Resumed";
    case VIR_DOMAIN_EVENT_STOPPED: return "Stopped";
    case VIR_DOMAIN_EVENT_SHUTDOWN: return "Shutdown";
    case VIR_DOMAIN_EVENT_PMSUSPENDED: return "PMSuspended";
    case VIR_DOMAIN_EVENT_CRASHED: return "Crashed";
    default: return absl::StrCat("Event", event);
  }
}

std::string LifecycleDetailName(int event, int detail) {
  switch (event) {
    case VIR_DOMAIN_EVENT_STARTED:
      switch (detail) {
        case VIR_DOMAIN_EVENT_STARTED_BOOTED: return "Booted";
        case VIR_DOMAIN_EVENT_STARTED_MIGRATED: return "Migrated";
        case VIR_DOMAIN_EVENT_STARTED_RESTORED: return "Restored";
        case VIR_DOMAIN_EVENT_STARTED_WAKEUP: return "Wakeup";
        default: return "Unknown";
      }
    case VIR_DOMAIN_EVENT_SUSPENDED:
      switch (detail) {
        case VIR_DOMAIN_EVENT_SUSPENDED_PAUSED: return "Paused";
        case VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED: return "Migrated";
        case VIR_DOMAIN_EVENT_SUSPENDED_IOERROR: return "IOError";
        case VIR_DOMAIN_EVENT_SUSPENDED_WATCHDOG: return "Watchdog";
        case VIR_DOMAIN_EVENT_SUSPENDED_POSTCOPY: return "Postcopy";
        case VIR_DOMAIN_EVENT_SUSPENDED_POSTCOPY_FAILED: return "PostcopyFailed";
        default: return "Unknown";
      }
    case VIR_DOMAIN_EVENT_RESUMED:
      switch (detail) {
        case VIR_DOMAIN_EVENT_RESUMED_UNPAUSED: return "Unpaused";
        case VIR_DOMAIN_EVENT_RESUMED_MIGRATED: return "Migrated";
        case VIR_DOMAIN_EVENT_RESUMED_POSTCOPY: return "Postcopy";
        default: return "Unknown";
      }
    case VIR_DOMAIN_EVENT_STOPPED:
      switch (detail) {
        case VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN: return "Shutdown";
        case VIR_DOMAIN_EVENT_STOPPED_DESTROYED: return "Destroyed";
        case VIR_DOMAIN_EVENT_STOPPED_CRASHED: return "Crashed";
        case VIR_DOMAIN_EVENT_STOPPED_MIGRATED: return "Migrated";
        case VIR_DOMAIN_EVENT_STOPPED_SAVED: return "Saved";
        case VIR_DOMAIN_EVENT_STOPPED_FAILED: return "Failed";
        default: return "Unknown";
      }
    case VIR_DOMAIN_EVENT_CRASHED:
      return detail == VIR_DOMAIN_EVENT_CRASHED_PANICKED ? "Panicked" : "Crashloaded";
    case VIR_DOMAIN_EVENT_SHUTDOWN:
      return detail == VIR_DOMAIN_EVENT_SHUTDOWN_GUEST ? "Guest" : "Finished";
    default:
      return "";
  }
}

}  // namespace kvnode

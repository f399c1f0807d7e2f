#include "agent/manifest/admission.h"

// Empty on the cpu backend: kata_cuda.h is already included.
#pragma once
#include "kata_cuda.h"

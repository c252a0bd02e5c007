// The umbrella header: everything a user of ignis needs.
#pragma once

#include "ignis/allocator.h"
#include "ignis/autograd.h"
#include "ignis/data.h"
#include "ignis/data/mnist.h"
#include "ignis/device.h"
#include "ignis/dtype.h"
#include "ignis/error.h"
#include "ignis/generator.h"
#include "ignis/models.h"
#include "ignis/nn.h"
#include "ignis/ops.h"
#include "ignis/optim.h"
#include "ignis/scalar.h"
#include "ignis/serialize.h"
#include "ignis/tensor.h"
#include "ignis/train.h"

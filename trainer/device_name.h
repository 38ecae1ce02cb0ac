// DeviceName: the marketing name of a device, for logs and the MFU peak table.
#ifndef VARUNA_TRAINER_DEVICE_NAME_H_
#define VARUNA_TRAINER_DEVICE_NAME_H_

#include <c10/core/Device.h>

#include <string>

namespace trainer {

// "cpu" for the CPU; for a CUDA device its name as the driver reports it (e.g.
// "NVIDIA H200"), or "cuda:N" in a build without CUDA.
std::string DeviceName(const c10::Device& device);

}  // namespace trainer

#endif  // VARUNA_TRAINER_DEVICE_NAME_H_
